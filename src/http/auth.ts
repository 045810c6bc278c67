import type { FastifyReply, FastifyRequest } from 'fastify';
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

/** What authentication asks of the rate limits (http/rate-limit.ts); absent when off. */
export interface AuthLimits {
  /** 429 when the client address has used up its failed authentications. */
  addressRefusal(request: FastifyRequest): ApiError | undefined;
  /** Counts a failed authentication; the headers its 401 carries. */
  failed(request: FastifyRequest): Record<string, string>;
  /** Counts a request of a valid token: 429 beyond its limit, else its headers on `reply`. */
  admit(record: TokenRecord, reply: FastifyReply): ApiError | undefined;
}

/**
 * Checks credentials before the body is read, so a request without valid credentials is
 * refused before any of its input is looked at (DESIGN §3, order of checks). With rate
 * limits: an address over its failed-authentication limit is refused first (before any
 * token lookup), unless the token is one this process has verified; then the token's
 * own limit applies, before its scope.
 */
export function authenticate(tokens: TokenService, limits?: AuthLimits) {
  return (request: FastifyRequest, reply: FastifyReply): AuthOutcome => {
    const scope = request.routeOptions.config.operation?.scope;
    if (scope === undefined || scope === null) return undefined;
    const token = parseBearer(request.headers.authorization);
    const blocked = limits?.addressRefusal(request);
    if (blocked !== undefined && (token === undefined || !tokens.knownValid(token))) {
      return blocked;
    }
    if (token === undefined) {
      return new ApiError('missingCredentials', undefined, {
        'www-authenticate': REALM,
        ...limits?.failed(request),
      });
    }
    const record = tokens.authenticate(token);
    return record instanceof Promise
      ? record.then((r) => verdict(r, scope, request, reply, limits))
      : verdict(record, scope, request, reply, limits);
  };
}

function verdict(
  record: TokenRecord | undefined,
  scope: Scope,
  request: FastifyRequest,
  reply: FastifyReply,
  limits: AuthLimits | undefined,
): ApiError | undefined {
  if (record === undefined) {
    return new ApiError('invalidToken', undefined, {
      'www-authenticate': `${REALM}, error="invalid_token"`,
      ...limits?.failed(request),
    });
  }
  const limited = limits?.admit(record, reply);
  if (limited !== undefined) return limited;
  if (!record.scopes.includes(scope)) {
    return new ApiError('insufficientScope', `This operation needs the scope "${scope}".`, {
      'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
    });
  }
  request.token = record;
  return undefined;
}
