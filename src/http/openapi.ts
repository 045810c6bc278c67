import type { TSchema } from '@sinclair/typebox';
import { errorCatalogue, statusOf } from '../core/errors.js';
import { IDEMPOTENCY_KEY_TTL_MS } from '../core/idempotency.js';
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
  'Idempotent-Replayed': {
    description:
      '`true` when this is the answer kept for the `Idempotency-Key` sent (given again, ' +
      'not produced again); absent otherwise.',
    schema: { type: 'string', enum: ['true'] },
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
      headers: headerRefs(spec.headers ?? []),
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
        : status === 503
          ? ['Retry-After']
          : [];
    // 409 of a create with a key: Retry-After only on 40903, and a replayed refusal is marked.
    const keyed =
      status === 409 && op.idempotent
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
      headers: { ...headerRefs(challenge), ...keyed },
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
path \`404\`, unsupported method \`405\` with \`Allow\`), authentication (\`401\`), scope
(\`403\`), then input (\`400\`, \`413\`, \`415\`).

Every error, whatever its status, is \`application/json\` \`{"error": <int32>, "message": <string>}\`
and carries \`X-Request-Id\`. Besides the answers listed per operation, any request can get
\`404\` (no such path) or \`405\` (method not supported on the path, with \`Allow\`), both with
the Error body. Limits: request bodies 64 KiB (\`413\`), header fields 16 KiB (\`431\`), the
header section must arrive within 10 s and the whole request within 30 s (\`408\`). When the
database is locked or unreachable, operations answer \`503\` with \`Retry-After\`.

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
