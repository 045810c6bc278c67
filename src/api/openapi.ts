import type { TSchema } from '@sinclair/typebox';
import { errorCatalogue, type ErrorName, statusOf } from '../core/errors.js';
import { IDEMPOTENCY_KEY_TTL_MS } from '../core/idempotency.js';
import { description } from './openapi-description.js';
import { errorsByStatus, groupByStatus, type OperationSpec } from './operation.js';
import { ERROR_HEADERS } from './error-headers.js';
import {
  type HeaderName,
  type HeaderSpec,
  RESPONSE_HEADER_NAMES,
  RESPONSE_HEADERS,
} from './response-headers.js';
import {
  PREFLIGHT_ERRORS,
  preflightHeaderComponents,
  preflightOperation,
} from './openapi-preflight.js';
import { operations } from './operations.js';
import { components as plantComponents } from './schemas.js';
import { webhookComponents } from './webhook-schemas.js';
import { eventComponents } from './event-schemas.js';
import { webhookMessages } from './openapi-webhooks.js';

const components: Record<string, TSchema> = {
  ...plantComponents,
  ...webhookComponents,
  ...eventComponents,
};

type Json = Record<string, unknown>;

const byIdentity = new Map<unknown, string>(
  Object.entries(components).map(([name, schema]) => [schema, name]),
);

/** A schema as JSON, with every published component replaced by a $ref to it. */
function toJson(schema: unknown, root = true): unknown {
  const component = byIdentity.get(schema);
  if (!root && component !== undefined) return { $ref: `#/components/schemas/${component}` };
  if (Array.isArray(schema)) return schema.map((item) => toJson(item, false));
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) out[key] = toJson(value, false);
  return out;
}

function headerRefs(names: readonly string[]): Json {
  const all = ['X-Request-Id', ...names];
  return Object.fromEntries(all.map((name) => [name, { $ref: `#/components/headers/${name}` }]));
}

function parameters(op: OperationSpec): Json[] {
  const from = (schema: TSchema | undefined, location: 'path' | 'query') =>
    Object.entries((schema?.properties ?? {}) as Record<string, TSchema>).map(([name, s]) => ({
      name,
      in: location,
      required: location === 'path' || (schema?.required ?? []).includes(name),
      description: s.description,
      schema: toJson(s, false),
    }));
  const ifMatch = op.conditional
    ? [
        {
          name: 'If-Match',
          in: 'header',
          required: false,
          description:
            '`*` or entity tags from `ETag`: act only if the plant still has one of them ' +
            '(strong comparison), else `412`. A missing plant is still `404`.',
          schema: { type: 'string' },
        },
      ]
    : [];
  const idempotencyKey = op.idempotent
    ? [
        {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            'Makes the create safe to retry (IETF httpapi Idempotency-Key draft): a ' +
            'structured-field string such as `"8e03978e-40d5-43e8-bc93-6894a57f9324"` (the ' +
            'same characters unquoted are accepted too), 1 to 255 printable ASCII characters, ' +
            `unique per token. Kept ${IDEMPOTENCY_KEY_TTL_MS / 3_600_000} h after its first ` +
            'use. A retry with the same key and the same plant gets the first answer again; ' +
            'with another plant `422`; while the first is still being answered `409` ' +
            '(40903, with `Retry-After`).',
          schema: { type: 'string', minLength: 1 },
        },
      ]
    : [];
  const others = (op.requestHeaders ?? []).map(({ name, description }) => ({
    name,
    in: 'header',
    required: false,
    description,
    schema: { type: 'string' },
  }));
  return [
    ...from(op.params, 'path'),
    ...from(op.query, 'query'),
    ...ifMatch,
    ...idempotencyKey,
    ...others,
  ];
}

function responses(op: OperationSpec): Json {
  const out: Json = {};
  const limited: HeaderName[] = op.scope === null ? [] : ['RateLimit', 'RateLimit-Policy'];
  for (const [status, spec] of Object.entries(op.responses)) {
    const body =
      spec.schema === undefined
        ? {}
        : {
            content: Object.fromEntries([
              ...[spec.mediaType ?? 'application/json']
                .flat()
                .map((type) => [type, { schema: toJson(spec.schema!, false) }]),
              ...Object.entries(spec.alternatives ?? {}).map(([type, schema]) => [
                type,
                { schema: toJson(schema, false) },
              ]),
            ]),
          };
    out[status] = {
      description: spec.description,
      headers: headerRefs([...(spec.headers ?? []), ...limited]),
      ...body,
    };
  }
  return { ...out, ...errorResponses(errorsByStatus(op), limited) };
}

/**
 * The headers of the error answers of one status, from the table the error reply uses: a
 * reference to the component when every error of the status carries the header (or the
 * component is optional anyway), else an optional copy that says which errors carry it.
 */
function errorHeadersOf(names: readonly ErrorName[], limited: HeaderName[]): Json {
  const every: HeaderName[] = [];
  const some: Json = {};
  for (const header of RESPONSE_HEADER_NAMES) {
    const by = names.filter((name) => ERROR_HEADERS[name]?.some((h) => h.name === header));
    if (by.length === 0) continue;
    const spec: HeaderSpec = RESPONSE_HEADERS[header];
    const always = (name: ErrorName) =>
      ERROR_HEADERS[name]!.some((h) => h.name === header && h.always);
    if (by.length === names.length && by.every(always)) every.push(header);
    else if (spec.required === undefined) some[header] = { $ref: `#/components/headers/${header}` };
    else {
      const codes = by.map((name) => errorCatalogue[name].code).join(', ');
      const description = spec.description[0]!.toLowerCase() + spec.description.slice(1);
      some[header] = { description: `With ${codes}: ${description}`, schema: spec.schema };
    }
  }
  return { ...headerRefs([...every, ...limited]), ...some };
}

/** Error answers by status; `limited`: the rate-limit headers these answers may carry. */
function errorResponses(byStatus: Map<number, ErrorName[]>, limited: HeaderName[] = []): Json {
  const out: Json = {};
  for (const [status, names] of byStatus) {
    const codes = names.map(
      (name) => `\`${errorCatalogue[name].code}\` ${errorCatalogue[name].message}`,
    );
    out[String(status)] = {
      description: `Error. \`error\` is one of:\n\n- ${codes.join('\n- ')}`,
      headers: errorHeadersOf(names, limited),
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
  }
  return out;
}

function operation(op: OperationSpec): Json {
  return {
    operationId: op.operationId,
    summary: op.summary,
    description: op.description,
    tags: [op.tag],
    // OpenAPI 3.1 lets non-OAuth schemes list the roles they need: here, the scope.
    security: op.scope === null ? [] : [{ bearerAuth: [op.scope] }],
    parameters: parameters(op),
    ...(op.body && {
      requestBody: {
        required: true,
        content: Object.fromEntries(
          op.body.mediaTypes.map((type) => [
            type,
            {
              schema: toJson(op.body!.schema, false),
              ...(op.body!.examples && { examples: op.body!.examples }),
            },
          ]),
        ),
      },
    }),
    responses: responses(op),
  };
}

/** The OpenAPI 3.1 document of exactly what the server routes and answers. */
export function buildOpenApiDocument(): Json {
  const paths: Record<string, Json> = {};
  for (const op of operations) {
    paths[op.path] = { ...paths[op.path], [op.method.toLowerCase()]: operation(op) };
  }
  const preflightErrors = errorResponses(groupByStatus(PREFLIGHT_ERRORS));
  for (const [path, ops] of Object.entries(paths)) {
    const preflight = preflightOperation(
      path,
      Object.keys(ops).map((method) => method.toUpperCase()),
    );
    const responses = { ...(preflight.responses as Json), ...preflightErrors };
    paths[path] = { ...ops, options: { ...preflight, responses } };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Plant Store',
      version: '1.0.0',
      license: { name: 'MIT', identifier: 'MIT' },
      description,
    },
    // Relative: the document describes the server that serves it, wherever that is.
    servers: [{ url: '/', description: 'The server this document is served by.' }],
    security: [{ bearerAuth: [] }],
    tags: [
      { name: 'plants', description: 'The plants of the store.' },
      {
        name: 'webhooks',
        description:
          'Endpoints that receive plant changes as signed HTTP messages, and their deliveries.',
      },
      {
        name: 'events',
        description: 'The changes feed: every plant change, as pages and as a stream, resumable.',
      },
      { name: 'operations', description: 'Health, readiness and this document; no token needed.' },
      {
        name: 'cors',
        description: 'Preflights of cross-origin requests from browsers, when CORS is on.',
      },
    ],
    paths,
    webhooks: webhookMessages(),
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'An access token from `plantstore token create`, sent as `Bearer <token>`.',
        },
      },
      schemas: Object.fromEntries(
        Object.entries(components).map(([name, schema]) => [name, toJson(schema)]),
      ),
      headers: { ...RESPONSE_HEADERS, ...preflightHeaderComponents },
    },
    'x-error-catalogue': Object.entries(errorCatalogue).map(([name, kind]) => ({
      name,
      status: statusOf(kind),
      ...kind,
    })),
  };
}
