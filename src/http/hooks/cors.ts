import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../core/errors.js';
import { allowedMethods } from '../../api/allowed-methods.js';
import { CORS_ALLOWED_HEADERS, CORS_EXPOSED_HEADERS, CORS_MAX_AGE_S } from '../../api/cors.js';
import type { CorsOrigins } from '../../api/cors-origins.js';
import { sendError } from '../errors/error-reply.js';

export interface Cors {
  /** Headers for an answer to a request carrying this Origin. */
  headersFor(origin: string | undefined): Readonly<Record<string, string>>;
  /**
   * For the onRequest hook: adds the headers, and answers a preflight to a known path
   * (204, or 403 for an origin not allowed). True when it has answered.
   */
  handle(request: FastifyRequest, reply: FastifyReply): boolean;
}

/** The CORS policy for these origins; undefined (CORS off) for none. */
export function corsPolicy(origins: CorsOrigins | undefined): Cors | undefined {
  if (origins === undefined || origins.length === 0) return undefined;
  const listed = new Set(origins);
  const allowed = (origin: string) => origins === '*' || listed.has(origin);
  // Answers differ by Origin (and by whether there is one), so caches must key on it.
  const vary = { vary: 'Origin' };
  const exposed = CORS_EXPOSED_HEADERS.join(', ');
  const headersFor = (origin: string | undefined) =>
    origin === undefined || !allowed(origin)
      ? vary
      : {
          ...vary,
          'access-control-allow-origin': origins === '*' ? '*' : origin,
          'access-control-expose-headers': exposed,
        };
  const preflight = {
    'access-control-allow-headers': CORS_ALLOWED_HEADERS.join(', '),
    'access-control-max-age': String(CORS_MAX_AGE_S),
  };

  return {
    headersFor,
    handle(request, reply) {
      const { origin } = request.headers;
      reply.headers(headersFor(origin));
      if (
        request.method !== 'OPTIONS' ||
        origin === undefined ||
        request.headers['access-control-request-method'] === undefined
      ) {
        return false;
      }
      // An unknown path is 404 for a preflight too: routing comes first.
      const methods = allowedMethods(request.url.split('?', 1)[0]!);
      if (methods === undefined) return false;
      if (!allowed(origin)) {
        sendError(reply, new ApiError('originNotAllowed'));
        return true;
      }
      // The path's methods whatever was asked: the browser refuses what is not listed.
      reply
        .code(204)
        .headers({ ...preflight, 'access-control-allow-methods': methods.join(', ') })
        .send();
      return true;
    },
  };
}
