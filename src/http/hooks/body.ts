import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../../core/errors.js';
import { routingError } from '../errors/error-reply.js';
import { hasBody } from '../../api/headers.js';
import { BODY_LIMIT } from '../../api/limits.js';
import type { OperationSpec } from '../../api/operation.js';
import { decodeUtf8, parseJson, shapeViolation } from '../../api/json.js';

const JSON_MEDIA_TYPES = ['application/json', 'application/merge-patch+json'];

/** An `Expect: 100-continue` request (the expression Node itself matches) with a body. */
export function expectsContinue(request: FastifyRequest): boolean {
  const expect = request.headers.expect;
  return (
    expect !== undefined && /(?:^|\W)100-continue(?:$|\W)/i.test(expect) && hasBody(request.headers)
  );
}

/**
 * Refuses a body where the operation takes none, and a media type the operation does not
 * accept, before a byte of the body is parsed (the last check of the onRequest hook).
 */
export function bodyRefusal(
  request: FastifyRequest,
  op: OperationSpec | undefined,
): ApiError | undefined {
  // No route: 404 or 405 before the body is read. Fastify would parse it first on the
  // not-found route, and answer a bad or oversized one 400, 413 or 415: routing first.
  if (op === undefined) return routingError(request);
  if (op.body === undefined) {
    if (hasBody(request.headers)) return new ApiError('unexpectedBody');
    // Nothing to parse: a stray Content-Type (some clients always send one) must not
    // make Fastify run a body parser on the empty body and refuse the request.
    delete request.headers['content-type'];
    return undefined;
  }
  const header = request.headers['content-type'];
  if (header === undefined && !hasBody(request.headers)) return undefined;
  const [type = '', ...params] = (header ?? '').split(';').map((part) => part.trim().toLowerCase());
  const charset = params.find((param) => param.startsWith('charset='))?.slice('charset='.length);
  const utf8 = charset === undefined || charset === 'utf-8' || charset === '"utf-8"';
  if (!op.body.mediaTypes.includes(type) || !utf8) {
    return new ApiError(
      'unsupportedMediaType',
      `Send the body as ${op.body.mediaTypes.join(' or ')} in UTF-8.`,
    );
  }
  return undefined;
}

/** Replaces Fastify's JSON parsing (which rounds big integers) with the lossless one. */
export function registerJsonParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    JSON_MEDIA_TYPES,
    { parseAs: 'buffer', bodyLimit: BODY_LIMIT },
    (_request, body, done) => {
      try {
        const text = decodeUtf8(body as Buffer);
        const violation = shapeViolation(text);
        if (violation !== undefined) {
          return done(new ApiError('bodyTooComplex', `The request body is refused: ${violation}.`));
        }
        done(null, parseJson(text));
      } catch (error) {
        // The parser quotes the offending input, which may be half a surrogate pair.
        const reason =
          error instanceof RangeError
            ? 'it is nested too deeply'
            : (error as Error).message.replace(/\p{Cs}/gu, '\uFFFD');
        done(new ApiError('malformedJson', `The request body is not well-formed JSON: ${reason}.`));
      }
    },
  );
}
