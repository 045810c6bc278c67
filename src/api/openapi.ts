import type { TSchema } from '@sinclair/typebox';
import { errorCatalogue, type ErrorName, statusOf } from '../core/errors.js';
import { IDEMPOTENCY_KEY_TTL_MS } from '../core/idempotency.js';
import { INT64_MAX, INT64_MIN } from '../core/int64.js';
import { JSON_LIMITS } from './json.js';
import {
  BODY_LIMIT,
  HEADERS_TIMEOUT_MS,
  KEEP_ALIVE_TIMEOUT_MS,
  IN_FLIGHT_PER_CONNECTION,
  MAX_CONNECTIONS,
  PIPELINED_PER_CONNECTION,
  SEND_TIMEOUT_MS,
  REQUEST_TIMEOUT_MS,
  SHUTDOWN_GRACE_MS,
} from './limits.js';
import { errorsByStatus, groupByStatus, type HeaderName, type OperationSpec } from './operation.js';
import {
  corsDescription,
  PREFLIGHT_ERRORS,
  preflightHeaderComponents,
  preflightOperation,
} from './openapi-preflight.js';
import { operations } from './operations.js';
import { components } from './schemas.js';

type Json = Record<string, unknown>;

const headerComponents: Record<HeaderName | 'X-Request-Id' | 'Allow', Json> = {
  'X-Request-Id': {
    description:
      'Identifier of this request in the server logs: the X-Request-Id the client sent ' +
      '(1 to 128 visible ASCII characters), or a new UUID.',
    required: true,
    schema: { type: 'string' },
  },
  Location: {
    description: 'Path of the plant created, e.g. /plants/42.',
    required: true,
    schema: { type: 'string', format: 'uri-reference' },
  },
  Link: {
    description:
      'RFC 8288 link to the next page, `</plants?limit=...&after=...>; rel="next"`; ' +
      'absent on the last page.',
    schema: { type: 'string' },
  },
  'Retry-After': {
    description: 'Seconds after which the request may be retried.',
    required: true,
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  ETag: {
    description:
      'Strong entity tag of the plant as answered; send it back in `If-Match` to update or ' +
      'delete the plant only if nobody changed it since.',
    required: true,
    schema: { type: 'string' },
  },
  'Idempotent-Replayed': {
    description:
      '`true` when this is the answer kept for the `Idempotency-Key` sent (given again, ' +
      'not produced again); absent otherwise.',
    schema: { type: 'string', enum: ['true'] },
  },
  Allow: {
    description: 'The methods the path supports, e.g. `GET, POST`.',
    required: true,
    schema: { type: 'string' },
  },
  RateLimit: {
    description:
      'What is left of the rate limit this answer reports on (draft-ietf-httpapi-ratelimit-headers-11, ' +
      'a Structured Field List): `"token";r=<requests left>;t=<seconds until the window ends>` ' +
      'on every answer once the token is verified, or `"failed-auth";r=<failed ' +
      'authentications left to this client address>;t=<seconds>` on a `401` and on a `429` ' +
      'with error 42902. Absent when the operator turned that limit off.',
    schema: { type: 'string', pattern: '^"(token|failed-auth)";r=[0-9]+;t=[0-9]+$' },
  },
  'RateLimit-Policy': {
    description:
      'The rate limit this answer reports on, sent with `RateLimit` (same draft): ' +
      '`"token";q=<requests>;w=<window in seconds>` (by default `"token";q=100000;w=60`) or ' +
      '`"failed-auth";q=<failed authentications>;w=<seconds>` (by default ' +
      '`"failed-auth";q=100;w=60`). Windows are fixed and aligned to the clock (a 60 s ' +
      'window starts at each whole minute).',
    schema: { type: 'string', pattern: '^"(token|failed-auth)";q=[0-9]+;w=[0-9]+$' },
  },
  'WWW-Authenticate': {
    description:
      'RFC 6750 challenge: `Bearer realm="plantstore"`, with `error="invalid_token"` for an ' +
      'unknown, revoked or expired token, or `error="insufficient_scope", scope="..."`.',
    required: true,
    schema: { type: 'string' },
  },
};

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
  return [...from(op.params, 'path'), ...from(op.query, 'query'), ...ifMatch, ...idempotencyKey];
}

function responses(op: OperationSpec): Json {
  const out: Json = {};
  const limited: HeaderName[] = op.scope === null ? [] : ['RateLimit', 'RateLimit-Policy'];
  for (const [status, spec] of Object.entries(op.responses)) {
    const body =
      spec.schema === undefined
        ? {}
        : {
            content: Object.fromEntries(
              [spec.mediaType ?? 'application/json']
                .flat()
                .map((type) => [type, { schema: toJson(spec.schema!, false) }]),
            ),
          };
    out[status] = {
      description: spec.description,
      headers: headerRefs([...(spec.headers ?? []), ...limited]),
      ...body,
    };
  }
  return { ...out, ...errorResponses(errorsByStatus(op), limited) };
}

/** Headers an error answer always carries, besides X-Request-Id. */
const errorHeaders: Partial<Record<ErrorName, string>> = {
  missingCredentials: 'WWW-Authenticate',
  invalidToken: 'WWW-Authenticate',
  insufficientScope: 'WWW-Authenticate',
  methodNotAllowed: 'Allow',
  storeUnavailable: 'Retry-After',
  tokenRateLimited: 'Retry-After',
  authFailureRateLimited: 'Retry-After',
};

/** Error answers by status; `limited`: the rate-limit headers these answers may carry. */
function errorResponses(byStatus: Map<number, ErrorName[]>, limited: HeaderName[] = []): Json {
  const out: Json = {};
  for (const [status, names] of byStatus) {
    const codes = names.map(
      (name) => `\`${errorCatalogue[name].code}\` ${errorCatalogue[name].message}`,
    );
    const headers = new Set(names.flatMap((name) => errorHeaders[name] ?? []));
    // The 409 of a create with a key: Retry-After comes with 40903 only, so it is optional
    // here, and a refusal kept for the key is marked when it is replayed.
    const keyed = names.includes('idempotencyKeyInFlight')
      ? {
          'Retry-After': {
            description: 'With 40903: seconds after which the request may be retried.',
            schema: { type: 'string', pattern: '^[0-9]+$' },
          },
          'Idempotent-Replayed': { $ref: '#/components/headers/Idempotent-Replayed' },
        }
      : {};
    out[String(status)] = {
      description: `Error. \`error\` is one of:\n\n- ${codes.join('\n- ')}`,
      headers: { ...headerRefs([...headers, ...limited]), ...keyed },
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
          op.body.mediaTypes.map((type) => [type, { schema: toJson(op.body!.schema, false) }]),
        ),
      },
    }),
    responses: responses(op),
  };
}

const catalogueTable = Object.entries(errorCatalogue)
  .map(([name, kind]) => `| ${kind.code} | ${statusOf(kind)} | ${name} | ${kind.message} |`)
  .join('\n');

const seconds = (ms: number) => `${ms / 1000} s`;

const description = `A plant store. Every plant is identified by a signed 64-bit integer id
(${INT64_MIN} to ${INT64_MAX}), exact everywhere: in paths and query strings as a canonical
decimal (no sign on positives, no leading zeros), in JSON as an integer (never a string).

Every operation under /plants needs \`Authorization: Bearer <ACCESS_TOKEN>\`; reads need
the scope \`plants:read\`, writes \`plants:write\`. Checks run in this order: routing (unknown
path \`404\`, unsupported method \`405\` with \`Allow\`), the client address's
failed-authentication limit (\`429\`), authentication (\`401\`), the token's rate limit
(\`429\`), scope (\`403\`), then input (\`400\`, \`413\`, \`415\`).

Every error, whatever its status, is \`application/json\` \`{"error": <int32>, "message": <string>}\`
and carries \`X-Request-Id\`. Besides the answers listed per operation, any request can get
\`404\` (no such path) or \`405\` (method not supported on the path, with \`Allow\`), both with
the Error body. \`HEAD\` is not served (\`405\`), nor \`OPTIONS\` except as a CORS preflight.
When the database is locked or unreachable, operations answer \`503\` with \`Retry-After\`.

## Limits

- Size: request bodies ${BODY_LIMIT / 1024} KiB (\`413\`), the header section 16 KiB (\`431\`);
  a JSON body may nest ${JSON_LIMITS.depth} levels deep and hold arrays of ${JSON_LIMITS.arrayItems}
  items at most (\`400\`, 40009), checked before it is parsed.
- Time: the header section must arrive within ${seconds(HEADERS_TIMEOUT_MS)} and the whole
  request, headers and body, within ${seconds(REQUEST_TIMEOUT_MS)} (\`408\`, then the
  connection is closed); an idle keep-alive connection is closed after
  ${seconds(KEEP_ALIVE_TIMEOUT_MS)}. These are the defaults; a server may be started with
  others (\`--headers-timeout\`, \`--request-timeout\`, \`--keep-alive-timeout\`).
- Sending: an answer of which the client takes nothing for ${seconds(SEND_TIMEOUT_MS)}
  closes its connection (\`--send-timeout\`).
- Connections: a process keeps at most ${MAX_CONNECTIONS} open by default
  (\`--max-connections\`); one beyond is closed at once, without an answer. A connection
  has at most ${IN_FLIGHT_PER_CONNECTION} requests answered at once, and nothing more is read from it
  meanwhile; a client that pipelines more than ${PIPELINED_PER_CONNECTION} requests ahead of
  its answers is disconnected.
- Versions: HTTP/1.1 and HTTP/1.0; any other version on the request line is \`505\`.
- Shutdown: requests still running ${seconds(SHUTDOWN_GRACE_MS)} after the server was told
  to stop are cut off (\`--shutdown-grace\`).

## Headers on every answer

\`X-Request-Id\`; \`X-Content-Type-Options: nosniff\`, so a browser never treats an answer
as another type than the one sent; \`Cache-Control: no-store\`, as answers hold one token
holder's view of the data (only the assets of /docs may be cached). No \`X-Powered-By\`.

## CORS

${corsDescription}

## Rate limits

Two limits apply to the operations that take a token, in fixed windows aligned to the clock
(by default; the operator may change or turn off either, and \`RateLimit-Policy\` says what
applies):

- **per token**: 100000 requests per 60 s window, every request with a valid token counting,
  whatever its answer. Beyond that, \`429\` with error 42901 until the window ends.
- **per client address, failed authentications**: 100 \`401\` answers per 60 s window. Beyond
  that, requests from the address are \`429\` with error 42902 until the window ends, before
  their token is looked up, except those whose token this server has already verified.
  Credentials still being checked count as failures until they turn out valid: guesses sent
  at once are held to the limit like guesses sent one after another.

Every \`429\` carries \`Retry-After\` (seconds until the window ends). Answers report the
limit that applied to them in \`RateLimit\` and \`RateLimit-Policy\`
(draft-ietf-httpapi-ratelimit-headers-11): the token's on answers after the token is verified,
the address's on \`401\`s and on 42902.

## Error catalogue

\`Math.trunc(error / 100)\` is the HTTP status.

| error | status | name | meaning |
|---|---|---|---|
${catalogueTable}
`;

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
      { name: 'operations', description: 'Health, readiness and this document; no token needed.' },
      {
        name: 'cors',
        description: 'Preflights of cross-origin requests from browsers, when CORS is on.',
      },
    ],
    paths,
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
      headers: { ...headerComponents, ...preflightHeaderComponents },
    },
    'x-error-catalogue': Object.entries(errorCatalogue).map(([name, kind]) => ({
      name,
      status: statusOf(kind),
      ...kind,
    })),
  };
}
