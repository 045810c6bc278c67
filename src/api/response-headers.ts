// The response headers of the API, described once: the OpenAPI document publishes them
// under components/headers, and a web page may read every one of them (CORS exposes them).

/** A header as the document describes it. */
export interface HeaderSpec {
  description: string;
  /** Present on every answer the header is listed on. */
  required?: true;
  schema: { type: 'string'; format?: string; pattern?: string; enum?: string[] };
}

export const RESPONSE_HEADERS = {
  Location: {
    description:
      'Path of what the answer points to: what was created (`/plants/42`, `/webhooks/7`) on ' +
      'a `201`, the page redirected to (`/docs`) on a `302` or `308`.',
    required: true,
    schema: { type: 'string', format: 'uri-reference' },
  },
  ETag: {
    description:
      'Strong entity tag of the plant as answered; send it back in `If-Match` to update or ' +
      'delete the plant only if nobody changed it since, or in `If-None-Match` to read it ' +
      'again only if it changed (`304` otherwise).',
    required: true,
    schema: { type: 'string' },
  },
  Link: {
    description:
      'RFC 8288 link to the next page, such as `</plants?limit=...&after=...>; rel="next"`; ' +
      'absent on the last page.',
    schema: { type: 'string' },
  },
  'Retry-After': {
    description: 'Seconds after which the request may be retried.',
    required: true,
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  'X-Request-Id': {
    description:
      'Identifier of this request in the server logs: the X-Request-Id the client sent ' +
      '(1 to 128 visible ASCII characters), or a new UUID.',
    required: true,
    schema: { type: 'string' },
  },
  'WWW-Authenticate': {
    description:
      'RFC 6750 challenge: `Bearer realm="plantstore"`, with `error="invalid_token"` for an ' +
      'unknown, revoked or expired token, or `error="insufficient_scope", scope="..."`.',
    required: true,
    schema: { type: 'string' },
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
      'on every answer once the token is verified (but a `429` with error 42903, refused before ' +
      'the rate limit counts it), or `"failed-auth";r=<failed ' +
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
  'Idempotent-Replayed': {
    description:
      '`true` when this is the answer kept for the `Idempotency-Key` sent (given again, ' +
      'not produced again); absent otherwise.',
    schema: { type: 'string', enum: ['true'] },
  },
} as const satisfies Record<string, HeaderSpec>;

export type HeaderName = keyof typeof RESPONSE_HEADERS;

export const RESPONSE_HEADER_NAMES = Object.keys(RESPONSE_HEADERS) as HeaderName[];
