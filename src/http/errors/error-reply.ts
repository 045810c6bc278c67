import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorHeaderValues } from '../../api/error-headers.js';
import { ApiError, type ErrorName } from '../../core/errors.js';
import { StoreUnavailableError } from '../../core/unavailable.js';
import { allowedMethods } from '../../api/allowed-methods.js';
import { hasBody } from '../../api/headers.js';

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
  if (error instanceof StoreUnavailableError) {
    return new ApiError('storeUnavailable');
  }
  const { code, statusCode } = (error ?? {}) as { code?: string; statusCode?: number };
  const name = (code && fastifyErrors[code]) || (statusCode && byStatus[statusCode]);
  if (name) return new ApiError(name);
  if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
    return new ApiError('malformedRequest');
  }
  return new ApiError('internal');
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  // Refused before its body has arrived (401, 404, 413...): the rest of that body would
  // be read as the next request, or run into the request timeout and a second, unasked
  // 408. The connection is closed after this answer instead.
  if (bodyPending(reply.request.raw)) reply.header('connection', 'close');
  return reply
    .code(error.status)
    .headers(errorHeaderValues(error))
    .type('application/json; charset=utf-8')
    .send(error.toBody());
}

/**
 * 5xx answers that are no failure: a limit the server states, as a 429 is (the request's
 * line records them). Logged as errors, one client's reconnects wrote thousands of lines with
 * a stack each.
 */
const STATED_LIMITS = new Set<ErrorName>(['tooManyEventStreams', 'tokenChecksBusy']);

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    const answer = toApiError(error);
    if (answer.status >= 500 && !STATED_LIMITS.has(answer.errorName)) {
      request.log.error({ err: error }, 'request failed');
    }
    return sendError(reply, answer);
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, routingError(request)));
}

function bodyPending(request: IncomingMessage): boolean {
  return !request.complete && hasBody(request.headers);
}

/** The answer to a request no route serves: 404, or 405 with Allow on a known path. */
export function routingError(request: FastifyRequest): ApiError {
  const path = request.url.split('?', 1)[0]!;
  const allowed = allowedMethods(path);
  if (allowed === undefined) {
    return new ApiError('routeNotFound', `No resource at ${truncate(path)}.`);
  }
  const detail = `${request.method} is not supported here; use ${allowed.join(', ')}.`;
  return new ApiError('methodNotAllowed', detail, { allow: allowed.join(', ') });
}

function truncate(text: string): string {
  return text.length > 100 ? `${text.slice(0, 100)}...` : text;
}
