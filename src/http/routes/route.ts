import type { Static, TSchema } from '@sinclair/typebox';
import type { FastifyContextConfig, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorsByStatus, type OperationSpec } from '../../api/operation.js';
import { ErrorSchema } from '../../api/schemas.js';
import { holdingPlace } from '../hooks/in-flight.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The operation a route serves; absent on the not-found route. */
    operation?: OperationSpec;
    /** The route's path as Fastify writes it (`/plants/:id`); Fastify sets it. */
    url?: string;
  }
  interface FastifyRequest {
    /**
     * The route's config, read once by the first hook: `request.routeOptions` builds a new
     * object of thirteen fields on every read. Null until then (see routeConfigOf).
     */
    routeConfig: FastifyContextConfig | null;
  }
}

/** The config of the request's route, from the copy the first hook made if it ran. */
export const routeConfigOf = (request: FastifyRequest): FastifyContextConfig =>
  request.routeConfig ?? request.routeOptions.config;

type StaticOf<S> = S extends TSchema ? Static<S> : undefined;

export type OperationRequest<P, Q, B> = FastifyRequest<{
  Params: StaticOf<P>;
  Querystring: StaticOf<Q>;
  Body: StaticOf<B>;
}>;

/** Response schemas Fastify serializes JSON answers with (bigint-safe for int64). */
function serializedResponses(op: OperationSpec): Record<number, TSchema> {
  const out: Record<number, TSchema> = {};
  for (const [status, spec] of Object.entries(op.responses)) {
    if (
      spec.schema !== undefined &&
      (spec.mediaType ?? 'application/json') === 'application/json'
    ) {
      out[Number(status)] = spec.schema;
    }
  }
  for (const status of errorsByStatus(op).keys()) out[status] = ErrorSchema;
  return out;
}

/** Registers the handler of an operation, with the schemas its spec declares. */
export function route<
  P extends TSchema | undefined,
  Q extends TSchema,
  B extends TSchema | undefined,
>(
  app: FastifyInstance,
  op: OperationSpec<P, Q, B>,
  handler: (
    request: OperationRequest<P, Q, B>,
    reply: FastifyReply,
  ) => Promise<unknown> | undefined,
): void {
  app.route({
    method: op.method,
    url: fastifyPath(op.path),
    schema: {
      ...(op.params && { params: op.params }),
      querystring: op.query,
      ...(op.body && { body: op.body.schema }),
      response: serializedResponses(op as OperationSpec),
    },
    config: { operation: op as OperationSpec },
    // A handler that has answered synchronously returns undefined: Fastify then waits on
    // nothing, where a promise (or the reply, a thenable) costs microtasks after the send.
    // One that returns undefined without having sent leaves its request hanging.
    // The token's place among its requests in flight is kept until the handler is done,
    // even when its client has gone (see hooks/in-flight.ts).
    handler: holdingPlace(handler) as (
      request: FastifyRequest,
      reply: FastifyReply,
    ) => Promise<unknown>,
  });
}

/** `/plants/{id}` as Fastify writes it: `/plants/:id`. */
function fastifyPath(template: string): string {
  return template.replace(/\{([^}]+)\}/g, ':$1');
}
