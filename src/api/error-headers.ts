import type { ApiError, ErrorName } from '../core/errors.js';
import type { HeaderName } from './response-headers.js';

/** A header a refusal carries: on every such answer, or only when it is a replayed one. */
export interface ErrorHeader {
  readonly name: HeaderName;
  /** Sent on every answer with this error; else only on a replay of a kept answer. */
  readonly always: boolean;
  /** The value when the refusal does not bring one of its own. */
  readonly fixed?: string;
}

const always = (name: HeaderName, fixed?: string): ErrorHeader => ({
  name,
  always: true,
  ...(fixed !== undefined && { fixed }),
});
const onReplay: ErrorHeader = { name: 'Idempotent-Replayed', always: false, fixed: 'true' };

/**
 * Which refusal carries which header. The error reply sends them from this table and the
 * OpenAPI document lists them from it, so the two cannot drift apart. Values that depend on
 * the request (the challenge, the methods, the seconds left of a rate-limit window) come
 * with the refusal from the HTTP layer that made it; the others are fixed here. The
 * RateLimit fields are not refusals' own: every answer of an operation that takes a token
 * may carry them (see http/hooks/rate-limit.ts).
 */
export const ERROR_HEADERS: Partial<Record<ErrorName, readonly ErrorHeader[]>> = {
  missingCredentials: [always('WWW-Authenticate')],
  invalidToken: [always('WWW-Authenticate')],
  insufficientScope: [always('WWW-Authenticate')],
  methodNotAllowed: [always('Allow')],
  // A create refused this way is kept for its Idempotency-Key, and replayed as such.
  plantExists: [onReplay],
  idsExhausted: [onReplay],
  idempotencyKeyInFlight: [always('Retry-After', '1')],
  tokenRateLimited: [always('Retry-After')],
  authFailureRateLimited: [always('Retry-After')],
  tokenBusy: [always('Retry-After', '1')],
  tokenChecksBusy: [always('Retry-After', '1')],
  storeUnavailable: [always('Retry-After', '1')],
  tooManyEventStreams: [always('Retry-After', '5')],
};

/**
 * The headers of an answer to `error`: those of its row in ERROR_HEADERS, valued from the
 * refusal or the table, plus the rate-limit fields the refusal brings.
 */
export function errorHeaderValues(error: ApiError): Record<string, string> {
  const values: Record<string, string> = {};
  for (const header of ERROR_HEADERS[error.errorName] ?? []) {
    if (!header.always && !error.replayed) continue;
    const key = header.name.toLowerCase();
    const value = error.headers[key] ?? header.fixed;
    if (value === undefined) throw new Error(`${error.errorName} needs a ${header.name} value`);
    values[key] = value;
  }
  for (const field of ['ratelimit', 'ratelimit-policy']) {
    const value = error.headers[field];
    if (value !== undefined) values[field] = value;
  }
  return values;
}
