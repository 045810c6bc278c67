import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { ApiError, type ErrorName } from '../../core/errors.js';
import { SECURITY_HEADER_LINES } from '../../api/security-headers.js';
import { withFinalNewline } from '../hooks/json-newline.js';

/** How long a connection answered raw stays open for its client to read the answer. */
const RAW_ANSWER_LINGER_MS = 1_000;

/**
 * Writes an Error answer straight to a socket, for what never becomes a Fastify
 * request: what Node's HTTP parser rejects, and CONNECT. Logged like any request.
 */
function answerRaw(
  log: FastifyBaseLogger,
  socket: Duplex,
  error: ApiError,
  cause: string | undefined,
): void {
  const reqId = randomUUID();
  // No headers were parsed, so no X-Forwarded-For: the connection's address is all there is
  // (read before the socket ends, which may drop it).
  const client = (socket as Partial<Socket>).remoteAddress ?? null;
  const body = withFinalNewline(JSON.stringify(error.toBody()));
  socket.end(
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      SECURITY_HEADER_LINES +
      `X-Request-Id: ${reqId}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    // Node keeps a connection half open until the client closes its side too, and with it
    // the request it was reading (a 408 mid-body): its slot among the connections, and its
    // token's place among the requests in flight. A client that never closes would hold
    // them for good. Closed once the client had time to read the answer.
    () => setTimeout(() => socket.destroy(), RAW_ANSWER_LINGER_MS).unref(),
  );
  log.info({ reqId, status: error.status, cause, route: null, client }, 'request');
}

const parserErrors: Record<string, ErrorName> = {
  HPE_HEADER_OVERFLOW: 'headersTooLarge',
  ERR_HTTP_REQUEST_TIMEOUT: 'requestTimeout',
};

/** Fastify's clientErrorHandler: `this` is the Fastify instance. */
export function clientErrorHandler(
  this: { log: FastifyBaseLogger },
  error: Error & { code?: string },
  socket: Duplex,
): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const name = (error.code && parserErrors[error.code]) || 'malformedRequest';
  answerRaw(this.log, socket, new ApiError(name), error.code);
}

/** Node hands CONNECT to a separate event; without a listener it drops the socket. */
export function refuseConnect(log: FastifyBaseLogger, socket: Duplex): void {
  answerRaw(log, socket, new ApiError('malformedRequest', 'CONNECT is not supported.'), 'CONNECT');
}
