import type { components } from './schema.js';

/** The body of every error answer: a code from the catalogue and a message for people. */
export type ErrorBody = components['schemas']['Error'];

/** A code of the error catalogue; `Math.trunc(code / 100)` is the HTTP status. */
export type ErrorCode = ErrorBody['error'];

/** One item of the `RateLimit` field: what is left of a policy's quota, and for how long. */
export interface RateLimitState {
  policy: string;
  /** Requests left in the window (`r`). */
  remaining?: number;
  /** Seconds until the window ends and the quota is restored (`t`). */
  resetSeconds?: number;
}

/** One item of the `RateLimit-Policy` field: a policy's quota per window. */
export interface RateLimitPolicy {
  policy: string;
  /** Requests per window (`q`). */
  quota?: number;
  /** The window, in seconds (`w`). */
  windowSeconds?: number;
}

// One item of a Structured Field List (RFC 9651) whose value is a String, with Integer
// parameters: `"token";r=42;t=30`. Parameters of other types are skipped, not refused.
const ITEM = /^\s*"((?:[^"\\]|\\["\\])*)"((?:\s*;\s*[a-z*][a-z0-9_.*-]*(?:=[^;,]*)?)*)\s*$/;

/** Splits a Structured Field List at the commas outside strings. */
function listItems(field: string): string[] {
  const items: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < field.length; i++) {
    const c = field[i];
    if (quoted && c === '\\') i++;
    else if (c === '"') quoted = !quoted;
    else if (c === ',' && !quoted) {
      items.push(field.slice(start, i));
      start = i + 1;
    }
  }
  items.push(field.slice(start));
  return items;
}

function parseItems(field: string | null): { name: string; params: Map<string, number> }[] {
  if (field === null) return [];
  return listItems(field).flatMap((item) => {
    const match = ITEM.exec(item);
    if (!match) return [];
    const params = new Map<string, number>();
    for (const param of match[2]!.split(';').slice(1)) {
      const [key = '', value = ''] = param.trim().split('=');
      if (/^-?\d{1,15}$/.test(value.trim())) params.set(key, Number(value));
    }
    return [{ name: match[1]!.replace(/\\(["\\])/g, '$1'), params }];
  });
}

/** The `RateLimit` field's items (draft-ietf-httpapi-ratelimit-headers), malformed ones left out. */
export function parseRateLimit(field: string | null): RateLimitState[] {
  return parseItems(field).map(({ name, params }) => ({
    policy: name,
    ...(params.has('r') && { remaining: params.get('r')! }),
    ...(params.has('t') && { resetSeconds: params.get('t')! }),
  }));
}

/** The `RateLimit-Policy` field's items, malformed ones left out. */
export function parseRateLimitPolicy(field: string | null): RateLimitPolicy[] {
  return parseItems(field).map(({ name, params }) => ({
    policy: name,
    ...(params.has('q') && { quota: params.get('q')! }),
    ...(params.has('w') && { windowSeconds: params.get('w')! }),
  }));
}

/**
 * `Retry-After` (RFC 9110 §10.2.3) in seconds from `now`: delay-seconds or an HTTP-date.
 * Undefined when absent or malformed.
 */
export function parseRetryAfter(field: string | null, now: number): number | undefined {
  if (field === null) return undefined;
  const text = field.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const date = Date.parse(text);
  if (Number.isNaN(date) || !/GMT$/.test(text)) return undefined;
  return Math.max(0, Math.ceil((date - now) / 1000));
}

function isErrorBody(value: unknown): value is ErrorBody {
  if (value === null || typeof value !== 'object') return false;
  const body = value as Record<string, unknown>;
  return Number.isInteger(body.error) && typeof body.message === 'string';
}

/**
 * An error answer from the server, as a value: the status, the Error body, the headers, and
 * the fields a caller decides on (when to retry, how much of the rate limit is left).
 *
 * @example
 * try { await client.plants.get(42n) }
 * catch (error) { if (error instanceof PlantstoreError && error.code === 40401) ... }
 */
export class PlantstoreError extends Error {
  override readonly name = 'PlantstoreError';
  /** The Error body; undefined when the answer had none (a proxy's page, say). */
  readonly body: ErrorBody | undefined;
  /** Seconds to wait before retrying, from `Retry-After`. */
  readonly retryAfter: number | undefined;
  readonly rateLimit: RateLimitState[];
  readonly rateLimitPolicy: RateLimitPolicy[];

  constructor(
    readonly status: number,
    body: unknown,
    readonly headers: Headers,
    now: number = Date.now(),
  ) {
    const errorBody = isErrorBody(body) ? body : undefined;
    super(
      errorBody
        ? `${status} (${errorBody.error}) ${errorBody.message}`
        : `${status}: the server answered without an Error body`,
    );
    this.body = errorBody;
    this.retryAfter = parseRetryAfter(headers.get('retry-after'), now);
    this.rateLimit = parseRateLimit(headers.get('ratelimit'));
    this.rateLimitPolicy = parseRateLimitPolicy(headers.get('ratelimit-policy'));
  }

  /** The code from the error catalogue (`body.error`). */
  get code(): ErrorCode | undefined {
    return this.body?.error;
  }

  /** The server's `X-Request-Id` of the request, to find its log line. */
  get requestId(): string | undefined {
    return this.headers.get('x-request-id') ?? undefined;
  }
}
