import type { FastifyRequest } from 'fastify';
import { ApiError } from '../core/errors.js';
import { parseIdempotencyKey } from '../core/idempotency.js';

const HEADER = 'idempotency-key';

/** The request's `Idempotency-Key`; undefined when absent, 400 when malformed or repeated. */
export function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const header = request.headers[HEADER];
  if (header === undefined) return undefined;
  // Node joins repeated lines with ", " into one value, and `"a` + `b"` joined is a valid
  // sf-string: only the raw lines tell that the header came twice.
  if (lineCount(request.raw.rawHeaders) > 1) throw new ApiError('malformedIdempotencyKey');
  const key = parseIdempotencyKey(Array.isArray(header) ? header.join(', ') : header);
  if (key === undefined) throw new ApiError('malformedIdempotencyKey');
  return key;
}

function lineCount(rawHeaders: string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === HEADER) count++;
  }
  return count;
}
