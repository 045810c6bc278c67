import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ApiError, type ErrorName, errorCatalogue, statusOf } from '../core/errors.js';
import { templateMatcher } from './operation.js';
import { operations } from './operations.js';

/** Bytes a request body may have; published in the OpenAPI document. */
export const BODY_LIMIT = 64 * 1024;

const fastifyErrors: Record<string, ErrorName> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'bodyTooLarge',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupportedMediaType',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'malformedJson',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'malformedRequest',
  FST_ERR_BAD_URL: 'malformedRequest',
};

const byStatus: Record<number, ErrorName> = {
  404: 'routeNotFound',
  408: 'requestTimeout',
  413: 'bodyTooLarge',
  415: 'unsupportedMediaType',
};

/**
 * The one place that decides how an error is answered: our own ApiErrors as they are,
 * framework errors by their code or status, anything else as a bare 500.
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const { code, statusCode } = (error ?? {}) as { code?: string; statusCode?: number };
  const name = (code && fastifyErrors[code]) || (statusCode && byStatus[statusCode]);
  if (name) return new ApiError(name);
  if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
    return new ApiError('malformedRequest');
  }
  return new ApiError('internal');
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  return reply
    .code(error.status)
    .headers(error.headers)
    .type('application/json; charset=utf-8')
    .send(error.toBody());
}

const routable = new Map<RegExp, string[]>();
for (const op of operations) {
  const matcher = [...routable.keys()].find((re) => re.source === templateMatcher(op.path).source);
  if (matcher) routable.get(matcher)!.push(op.method);
  else routable.set(templateMatcher(op.path), [op.method]);
}

/** Methods the API supports on a concrete path, or undefined when no route has it. */
export function allowedMethods(path: string): string[] | undefined {
  for (const [matcher, methods] of routable) if (matcher.test(path)) return methods;
  return undefined;
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    const answer = toApiError(error);
    if (answer.status >= 500) request.log.error({ err: error }, 'request failed');
    return sendError(reply, answer);
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?', 1)[0]!;
    const allowed = allowedMethods(path);
    if (allowed === undefined) {
      return sendError(reply, new ApiError('routeNotFound', `No resource at ${truncate(path)}.`));
    }
    const detail = `${request.method} is not supported here; use ${allowed.join(', ')}.`;
    return sendError(
      reply,
      new ApiError('methodNotAllowed', detail, { allow: allowed.join(', ') }),
    );
  });
}

function truncate(text: string): string {
  return text.length > 100 ? `${text.slice(0, 100)}...` : text;
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/**
 * Answers what Node's HTTP parser rejects before Fastify sees a request (malformed
 * syntax, oversized headers, slow requests) with the Error body, not Node's empty one.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const name: ErrorName =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 'headersTooLarge'
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'requestTimeout'
        : 'malformedRequest';
  const kind = errorCatalogue[name];
  const status = statusOf(kind);
  const body = JSON.stringify({ error: kind.code, message: kind.message });
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `X-Request-Id: ${randomUUID()}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
