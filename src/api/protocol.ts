import type { IncomingMessage } from 'node:http';
import { ApiError } from '../core/errors.js';
import { headerLines } from './headers.js';

/**
 * Refuses what HTTP/1.x itself forbids and Node's parser lets through: a version other
 * than 1.0 and 1.1 (llhttp accepts `HTTP/2.0` on a request line, and RFC 9110 §15.6.6 says
 * 505), and a Host header missing from an HTTP/1.1 request or given more than once
 * (RFC 9112 §3.2: 400; Node keeps the first of two and says nothing).
 */
export function protocolRefusal(request: IncomingMessage): ApiError | undefined {
  const version = request.httpVersion;
  if (version !== '1.1' && version !== '1.0') {
    return new ApiError(
      'httpVersionNotSupported',
      `HTTP/${version} is not supported on this connection; use HTTP/1.1.`,
    );
  }
  const hosts = headerLines(request.rawHeaders, 'host');
  if (hosts > 1)
    return new ApiError('malformedRequest', 'A request has one Host header, not several.');
  if (hosts === 0 && version === '1.1') {
    return new ApiError('malformedRequest', 'HTTP/1.1 requests need a Host header.');
  }
  return undefined;
}
