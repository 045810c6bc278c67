import type { FastifyRequest } from 'fastify';
import { ApiError } from '../core/errors.js';
import type { Scope } from '../core/scopes.js';
import { parseBearer, type TokenRecord } from '../core/tokens.js';
import type { TokenService } from '../service/token-service.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The token the request was authenticated with; null on operations open to all. */
    token: TokenRecord | null;
  }
}

const REALM = 'Bearer realm="plantstore"';

/** The refusal, if any; synchronous when the token is answered from the cache. */
export type AuthOutcome = ApiError | undefined | Promise<ApiError | undefined>;

/**
 * Checks credentials before the body is read, so a request without valid credentials is
 * refused before any of its input is looked at (DESIGN §3, order of checks).
 */
export function authenticate(tokens: TokenService) {
  return (request: FastifyRequest): AuthOutcome => {
    const scope = request.routeOptions.config.operation?.scope;
    if (scope === undefined || scope === null) return undefined;
    const token = parseBearer(request.headers.authorization);
    if (token === undefined) {
      return new ApiError('missingCredentials', undefined, { 'www-authenticate': REALM });
    }
    const record = tokens.authenticate(token);
    return record instanceof Promise
      ? record.then((r) => refusal(request, r, scope))
      : refusal(request, record, scope);
  };
}

function refusal(
  request: FastifyRequest,
  record: TokenRecord | undefined,
  scope: Scope,
): ApiError | undefined {
  if (record === undefined) {
    return new ApiError('invalidToken', undefined, {
      'www-authenticate': `${REALM}, error="invalid_token"`,
    });
  }
  if (!record.scopes.includes(scope)) {
    return new ApiError('insufficientScope', `This operation needs the scope "${scope}".`, {
      'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
    });
  }
  request.token = record;
  return undefined;
}
