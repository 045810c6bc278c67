import type { TSchema } from '@sinclair/typebox';
import { type ErrorName, errorCatalogue, statusOf } from '../core/errors.js';
import type { Scope } from '../core/scopes.js';
import type { HeaderName } from './response-headers.js';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export interface ResponseSpec {
  description: string;
  /** JSON schema of the body; absent for an empty body. */
  schema?: TSchema;
  /** Defaults to application/json when a schema is given; several when the body varies. */
  mediaType?: string | string[];
  headers?: HeaderName[];
  /**
   * Other bodies of the same status, by media type, that the request's `Accept` chooses (the
   * event stream of GET /events); not serialized from the schema.
   */
  alternatives?: Record<string, TSchema>;
}

/** A request header an operation reads, as the document lists it. */
export interface RequestHeaderSpec {
  name: string;
  description: string;
}

/**
 * One API operation, described once: the router, the validators, the auth hook and
 * the OpenAPI document are all built from these.
 */
export interface OperationSpec<
  P extends TSchema | undefined = TSchema | undefined,
  Q extends TSchema = TSchema,
  B extends TSchema | undefined = TSchema | undefined,
> {
  operationId: string;
  method: Method;
  /** OpenAPI path template, e.g. `/plants/{id}`. */
  path: string;
  summary: string;
  description: string;
  tag: 'plants' | 'webhooks' | 'events' | 'operations';
  /** Scope a bearer token needs; null for an operation open to all. */
  scope: Scope | null;
  params?: P;
  query: Q;
  body?: {
    schema: NonNullable<B>;
    mediaTypes: string[];
    /**
     * Bodies a reader can send as they are, by name: the reference page offers the first
     * in "Try it out", where it would otherwise make one up from the schema.
     */
    examples?: Record<string, { summary: string; value: unknown }>;
  };
  responses: Record<number, ResponseSpec>;
  /** Catalogue errors particular to this operation (the common ones are implied). */
  errors: ErrorName[];
  /** Request headers it reads, besides the common ones (a string each). */
  requestHeaders?: RequestHeaderSpec[];
  /** Takes an `If-Match` header (a conditional write). */
  conditional?: boolean;
  /** Takes an `Idempotency-Key` header (a create that can be retried safely). */
  idempotent?: boolean;
}

/** Every catalogue error an operation can answer with, common ones included. */
export function errorsOf(op: OperationSpec): ErrorName[] {
  // Any request can be malformed, too slow, have oversized headers or another version.
  const names: ErrorName[] = [
    ...op.errors,
    'invalidQuery',
    'malformedRequest',
    'requestTimeout',
    'headersTooLarge',
    'internal',
    'httpVersionNotSupported',
  ];
  if (op.scope !== null) {
    // Checking the token reads the database, so these can all find it unavailable.
    names.push('missingCredentials', 'invalidToken', 'insufficientScope', 'storeUnavailable');
    // Rate limits apply where a token is asked for (see http/rate-limit.ts).
    names.push('tokenRateLimited', 'authFailureRateLimited');
    // So do the places of requests in flight: per token, and for checks of unseen tokens.
    names.push('tokenBusy', 'tokenChecksBusy');
  }
  if (op.conditional) names.push('malformedPrecondition', 'preconditionFailed');
  if (op.idempotent) {
    names.push('malformedIdempotencyKey', 'idempotencyKeyInFlight', 'idempotencyKeyReused');
  }
  if (op.body === undefined) names.push('unexpectedBody');
  else {
    names.push('malformedJson', 'invalidBody', 'bodyTooComplex', 'bodyTooLarge');
    names.push('unsupportedMediaType');
  }
  return [...new Set(names)].sort((a, b) => errorCatalogue[a].code - errorCatalogue[b].code);
}

/** The errors of an operation grouped by the HTTP status they answer with. */
export function errorsByStatus(op: OperationSpec): Map<number, ErrorName[]> {
  return groupByStatus(errorsOf(op));
}

/** Catalogue errors grouped by the HTTP status they answer with. */
export function groupByStatus(names: readonly ErrorName[]): Map<number, ErrorName[]> {
  const byStatus = new Map<number, ErrorName[]>();
  for (const name of names) {
    const status = statusOf(errorCatalogue[name]);
    byStatus.set(status, [...(byStatus.get(status) ?? []), name]);
  }
  return byStatus;
}

/** Matches a concrete request path against an OpenAPI path template. */
export function templateMatcher(template: string): RegExp {
  const source = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+');
  return new RegExp(`^${source}$`);
}
