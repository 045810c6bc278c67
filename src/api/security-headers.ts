/**
 * Headers every answer carries, whichever path wrote it (a route, an error, Fastify's
 * own framework errors, or a raw answer to what Node's parser refused):
 * - `X-Content-Type-Options: nosniff`: a browser must not guess a type other than the
 *   one sent (a JSON body is never run as a script or shown as HTML);
 * - `Cache-Control: no-store`: answers carry one client's view of the data, made with its
 *   token; no cache on the way may keep them. The static /docs assets override it.
 * Fastify sends no `X-Powered-By`, and neither do we.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
};

/** The same headers as raw HTTP/1.1 header lines, for answers written to the socket. */
export const SECURITY_HEADER_LINES = Object.entries(SECURITY_HEADERS)
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('');
