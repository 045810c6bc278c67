import { RESPONSE_HEADER_NAMES } from './response-headers.js';

// What the CORS answers say, published in the OpenAPI document and sent by http/hooks/cors.ts.

/** Request headers a page may send besides the CORS-safelisted ones. */
export const CORS_ALLOWED_HEADERS = [
  // Named, not `*`: a wildcard does not cover Authorization (Fetch standard).
  'Authorization',
  'Content-Type',
  'If-Match',
  'If-None-Match',
  'Idempotency-Key',
  'X-Request-Id',
  // A page resuming the changes feed's stream (GET /events) after the last event it had.
  'Last-Event-ID',
];

/** Response headers a page may read besides the CORS-safelisted ones: all of ours. */
export const CORS_EXPOSED_HEADERS: readonly string[] = RESPONSE_HEADER_NAMES;

/** How long a browser may reuse a preflight answer (Chromium caps it at 2 h). */
export const CORS_MAX_AGE_S = 600;
