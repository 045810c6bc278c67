import type { TSchema } from '@sinclair/typebox';
import { errorCatalogue, statusOf } from '../core/errors.js';
import { INT64_MAX, INT64_MIN } from '../core/int64.js';
import { errorsByStatus, type HeaderName, type OperationSpec } from './operation.js';
import { operations } from './operations.js';
import { components } from './schemas.js';

type Json = Record<string, unknown>;

const headerComponents: Record<HeaderName | 'X-Request-Id', Json> = {
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
  return [...from(op.params, 'path'), ...from(op.query, 'query'), ...ifMatch];
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
  for (const [status, names] of errorsByStatus(op)) {
    const codes = names.map(
      (name) => `\`${errorCatalogue[name].code}\` ${errorCatalogue[name].message}`,
    );
    const challenge =
      status === 401 || status === 403
        ? ['WWW-Authenticate']
        : status === 503 || status === 429
          ? ['Retry-After']
          : [];
    out[String(status)] = {
      description: `Error. \`error\` is one of:\n\n- ${codes.join('\n- ')}`,
      headers: headerRefs([...challenge, ...limited]),
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
the Error body. Limits: request bodies 64 KiB (\`413\`), header fields 16 KiB (\`431\`), the
header section must arrive within 10 s and the whole request within 30 s (\`408\`). When the
database is locked or unreachable, operations answer \`503\` with \`Retry-After\`.

## Rate limits

Two limits apply to the operations that take a token, in fixed windows aligned to the clock
(by default; the operator may change or turn off either, and \`RateLimit-Policy\` says what
applies):

- **per token**: 100000 requests per 60 s window, every request with a valid token counting,
  whatever its answer. Beyond that, \`429\` with error 42901 until the window ends.
- **per client address, failed authentications**: 100 \`401\` answers per 60 s window. Beyond
  that, requests from the address are \`429\` with error 42902 until the window ends, before
  their token is looked up, except those whose token this server has already verified.

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
  return {
    openapi: '3.1.0',
    info: {
      title: 'Plant Store',
      version: '1.0.0',
      license: { name: 'MIT', identifier: 'MIT' },
      description,
    },
    security: [{ bearerAuth: [] }],
    tags: [
      { name: 'plants', description: 'The plants of the store.' },
      { name: 'operations', description: 'Health, readiness and this document; no token needed.' },
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
      headers: headerComponents,
    },
    'x-error-catalogue': Object.entries(errorCatalogue).map(([name, kind]) => ({
      name,
      status: statusOf(kind),
      ...kind,
    })),
  };
}
