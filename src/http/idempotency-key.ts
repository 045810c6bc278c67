import { ApiError } from '../core/errors.js';
import { parseIdempotencyKey } from '../core/idempotency.js';

/** The `Idempotency-Key` header's key; undefined when absent, 400 when malformed. */
export function idempotencyKeyOf(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  // Node joins repeated headers with ", ", which no valid key contains: two keys are refused.
  const key = parseIdempotencyKey(Array.isArray(header) ? header.join(', ') : header);
  if (key === undefined) throw new ApiError('malformedIdempotencyKey');
  return key;
}
