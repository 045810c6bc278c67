import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiError } from '../../core/errors.js';
import type { OperationSpec } from '../../api/operation.js';
import { protocolRefusal } from '../../api/protocol.js';
import { SECURITY_HEADERS } from '../../api/security-headers.js';
import { refuseConnect } from '../errors/raw-errors.js';
import type { authenticate } from './auth.js';
import { bodyRefusal, expectsContinue } from './body.js';
import type { Cors } from './cors.js';

/**
 * The checks every request passes before its handler, in the order docs/decisions.md
 * gives, all in the onRequest hook (before a byte of the body is read): the request itself
 * (version, Host), CORS, credentials and rate limits, then the body's presence and media
 * type. Also the requests Node hands to events of their own: CONNECT and Expect.
 */
export function installRequestChecks(
  app: FastifyInstance,
  credentialsRefusal: ReturnType<typeof authenticate>,
  cors: Cors | undefined,
): void {
  app.server.on('connect', (_request, socket) => refuseConnect(app.log, socket));
  // Node answers an Expect other than 100-continue with a bare 417 of its own (no Error
  // body) unless this event has a listener. RFC 9110 §10.1.1 lets a server ignore an
  // expectation it does not know: serve the request as usual.
  app.server.on('checkExpectation', (request, response) =>
    app.server.emit('request', request, response),
  );
  // One hook, written with a callback, not async: on the hot path every check is synchronous
  // (tokens come from the cache), and each hook and each promise is measurable.
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(SECURITY_HEADERS).header('x-request-id', request.id);
    const config = request.routeOptions.config;
    request.routeConfig = config;
    const malformed = protocolRefusal(request.raw);
    if (malformed !== undefined) return done(malformed);
    // Before authentication: a preflight carries no credentials, and errors need the
    // CORS headers too, or a page cannot read them.
    if (cors?.handle(request, reply)) return;
    const op = config.operation;
    const refused = credentialsRefusal(request, reply, op);
    if (refused instanceof Promise) {
      refused.then((error) => done(error ?? inputRefusal(request, reply, op)), done);
    } else {
      done(refused ?? inputRefusal(request, reply, op));
    }
  });
  // Node would send 100 Continue before any hook runs, so a client would upload its body
  // only to be refused: it is sent once the request has passed every check before input.
  app.server.on('checkContinue', (request, response) =>
    app.server.emit('request', request, response),
  );
}

/**
 * The body's presence and media type, checked once the credentials are: still before a
 * byte of the body is read (Fastify reads it after the onRequest hooks).
 */
function inputRefusal(
  request: FastifyRequest,
  reply: FastifyReply,
  op: OperationSpec | undefined,
): ApiError | undefined {
  const refused = bodyRefusal(request, op);
  if (refused === undefined && expectsContinue(request)) reply.raw.writeContinue();
  return refused;
}
