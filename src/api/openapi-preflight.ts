import type { ErrorName } from '../core/errors.js';
import { CORS_ALLOWED_HEADERS, CORS_EXPOSED_HEADERS, CORS_MAX_AGE_S } from './cors.js';

// The OPTIONS (CORS preflight) operation the document lists on every path. The server
// answers it only when started with --cors-origins; otherwise OPTIONS is 405 like any
// unsupported method, and the document says both, so every answer validates against it.

type Json = Record<string, unknown>;

/** Errors a preflight can answer with. */
export const PREFLIGHT_ERRORS: readonly ErrorName[] = [
  'malformedRequest',
  'originNotAllowed',
  'methodNotAllowed',
  'requestTimeout',
  'headersTooLarge',
  'internal',
  'httpVersionNotSupported',
];

const list = (names: readonly string[]) => names.map((name) => `\`${name}\``).join(', ');

/** Response headers of a preflight answer, for components/headers. */
export const preflightHeaderComponents: Record<string, Json> = {
  'Access-Control-Allow-Origin': {
    description: 'The origin of the request, or `*` when the server allows every origin.',
    required: true,
    schema: { type: 'string' },
  },
  'Access-Control-Allow-Methods': {
    description: 'The methods of the path, e.g. `GET, PATCH, DELETE`.',
    required: true,
    schema: { type: 'string' },
  },
  'Access-Control-Allow-Headers': {
    description: `Request headers a page may send: ${list(CORS_ALLOWED_HEADERS)}.`,
    required: true,
    schema: { type: 'string' },
  },
  'Access-Control-Max-Age': {
    description: 'Seconds a browser may reuse this answer for the same request.',
    required: true,
    schema: { type: 'string', const: String(CORS_MAX_AGE_S) },
  },
  Vary: {
    description: '`Origin`: answers depend on the origin of the request.',
    required: true,
    schema: { type: 'string' },
  },
};

const requestHeaders = [
  ['Origin', 'The origin of the page, e.g. `https://app.example` (set by the browser).'],
  [
    'Access-Control-Request-Method',
    'The method of the request the page wants to make (set by the browser).',
  ],
  ['Access-Control-Request-Headers', 'The headers it wants to send (set by the browser).'],
] as const;

/** The OPTIONS operation of a path whose operations have these methods; no error answers. */
export function preflightOperation(path: string, methods: readonly string[]): Json {
  const names = [...path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]!);
  const pathParameters = names.map((name) => ({
    name,
    in: 'path',
    required: true,
    description: 'Any value: a preflight does not look at it.',
    schema: { type: 'string' },
  }));
  // `/` is the root; `/docs/` must not take the name of `/docs`.
  const words = [
    ...path.split(/[^A-Za-z0-9]+/).filter(Boolean),
    ...(path.endsWith('/') ? [path === '/' ? 'root' : 'slash'] : []),
  ];
  return {
    operationId: `preflight${words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}`,
    summary: 'CORS preflight',
    description:
      'Sent by browsers before a cross-origin request that is not "simple" (one with ' +
      '`Authorization`, for instance); answered only when the server runs with ' +
      `\`--cors-origins\`. From an allowed origin: \`204\`, allowing ${methods.join(', ')} ` +
      'and the request headers listed in `Access-Control-Allow-Headers`. From another ' +
      'origin: `403` (40302). Without `Origin` and `Access-Control-Request-Method`, or with ' +
      'CORS off: `405` with `Allow`, as for any method the path does not support.',
    tags: ['cors'],
    security: [],
    parameters: [
      ...pathParameters,
      ...requestHeaders.map(([name, description]) => ({
        name,
        in: 'header',
        required: false,
        description,
        schema: { type: 'string' },
      })),
    ],
    responses: {
      204: {
        description: 'The browser may send the request.',
        headers: Object.fromEntries(
          ['X-Request-Id', ...Object.keys(preflightHeaderComponents)].map((name) => [
            name,
            { $ref: `#/components/headers/${name}` },
          ]),
        ),
      },
    },
  };
}

/** The CORS paragraph of the document's description. */
export const corsDescription = `CORS is off by default: no \`Access-Control-*\` headers, and
\`OPTIONS\` is \`405\` like any method a path does not support. A server started with
\`--cors-origins\` (a list of origins, or \`*\`) answers preflights (see the \`cors\`
operations) and adds \`Access-Control-Allow-Origin\` and \`Access-Control-Expose-Headers\`
(${list(CORS_EXPOSED_HEADERS)}) to every answer to an allowed origin, errors included;
with CORS on, every answer carries \`Vary: Origin\`. Requests from other origins are served
as usual, without CORS headers, so the browser keeps their answers from the page. Cookies
are never used, so \`Access-Control-Allow-Credentials\` is never sent. The answers Node's
HTTP parser makes the server write on its own (a malformed request \`400\`, \`431\`, and
\`408\` for a request too slow to arrive) carry no CORS headers.`;
