import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from '../core/errors.js';
import { parseIdempotencyKey } from '../core/idempotency.js';
import { headerLines } from './headers.js';

const HEADER = 'idempotency-key';

/** The request's `Idempotency-Key`; undefined when absent, 400 when malformed or repeated. */
export function idempotencyKeyOf(
  headers: IncomingHttpHeaders,
  rawHeaders: readonly string[],
): string | undefined {
  const header = headers[HEADER];
  if (header === undefined) return undefined;
  // `"a` and `b"` on two lines, joined by Node with ", ", would make one valid sf-string.
  if (headerLines(rawHeaders, HEADER) > 1) throw new ApiError('malformedIdempotencyKey');
  const key = parseIdempotencyKey(Array.isArray(header) ? header.join(', ') : header);
  if (key === undefined) throw new ApiError('malformedIdempotencyKey');
  return key;
}
