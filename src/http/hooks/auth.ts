import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../core/errors.js';
import type { Scope } from '../../core/scopes.js';
import { parseBearer, type TokenRecord } from '../../core/tokens.js';
import type { TokenService } from '../../service/token-service.js';
import type { OperationSpec } from '../../api/operation.js';
import type { TokenRequests } from './in-flight.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The token the request was authenticated with; null on operations open to all. */
    token: TokenRecord | null;
  }
}

const REALM = 'Bearer realm="plantstore"';

/** The token of a request to an operation that needs a scope: the auth hook set it, or refused. */
export function tokenOf(request: FastifyRequest): TokenRecord {
  if (request.token === null) throw new Error(`no token on ${request.method} ${request.url}`);
  return request.token;
}

/** The refusal, if any; synchronous when the token is answered from the cache. */
export type AuthOutcome = ApiError | undefined | Promise<ApiError | undefined>;

/** What authentication asks of the rate limits (http/rate-limit.ts); absent when both are off. */
export interface AuthLimits {
  /** The failed-authentication limit of client addresses; undefined when off. */
  readonly failures: FailureLimit | undefined;
  /** Counts a request of a valid token: 429 beyond its limit, else its headers on `reply`. */
  admit(record: TokenRecord, reply: FastifyReply): ApiError | undefined;
}

/** The failed-authentication limit of client addresses. */
export interface FailureLimit {
  /**
   * Holds a failure of the request's address before its credentials are checked: 429 when
   * none is left (failures and checks in flight together), else the attempt to settle.
   */
  attempt(request: FastifyRequest): ApiError | AuthAttempt;
  /** Counts a failure nothing was held for; the headers its 401 carries. */
  failed(request: FastifyRequest): Record<string, string>;
}

/** Credentials being checked, holding one failure of their address's limit. */
export interface AuthAttempt {
  /** They failed: the failure held counts; the headers the 401 carries. */
  failed(): Record<string, string>;
  /** They are valid, or could not be checked (503): the failure held is given back. */
  release(): void;
}

/**
 * Checks credentials before the body is read, so a request without valid credentials is
 * refused before any of its input is looked at (docs/decisions.md §3). With rate
 * limits: the address's failed-authentication limit comes first (before any token
 * lookup), unless the token is one this process has verified; then the token's requests
 * in flight (`requests`), then its own rate limit, before its scope.
 */
export function authenticate(tokens: TokenService, limits?: AuthLimits, requests?: TokenRequests) {
  const failures = limits?.failures;
  return (
    request: FastifyRequest,
    reply: FastifyReply,
    operation: OperationSpec | undefined,
  ): AuthOutcome => {
    const scope = operation?.scope;
    if (scope === undefined || scope === null) return undefined;
    const token = parseBearer(request.headers.authorization);
    // A token the cache vouches for is known valid: no failure to hold, no lookup.
    const fresh = token === undefined ? undefined : tokens.fresh(token);
    if (fresh !== undefined) {
      return verdict(fresh, scope, request, reply, limits, requests, undefined);
    }
    // A failure is held before the lookup, not counted after it: lookups run concurrently,
    // and would all pass the check before the first of them failed. A token this process
    // has verified holds nothing (the hot path, and a client behind a blocked address
    // keeps being served); should it fail after all (revoked since), that is counted then.
    let attempt: AuthAttempt | undefined;
    if (failures !== undefined && (token === undefined || !tokens.knownValid(token))) {
      const held = failures.attempt(request);
      if (held instanceof ApiError) return held;
      attempt = held;
    }
    if (token === undefined) {
      return new ApiError('missingCredentials', undefined, {
        'www-authenticate': REALM,
        ...attempt?.failed(),
      });
    }
    // Lookups of tokens this process does not know share a few places, so that guesses
    // from many addresses cannot fill the database pool ahead of everyone else's requests.
    if (!tokens.mayCheck(token)) {
      attempt?.release();
      return new ApiError('tokenChecksBusy');
    }
    const record = tokens.authenticate(token);
    if (record instanceof Promise) {
      return record.then(
        (r) => verdict(r, scope, request, reply, limits, requests, attempt),
        // The database did not answer (503): that is no failed authentication.
        (error: unknown) => {
          attempt?.release();
          throw error;
        },
      );
    }
    return verdict(record, scope, request, reply, limits, requests, attempt);
  };
}

function verdict(
  record: TokenRecord | undefined,
  scope: Scope,
  request: FastifyRequest,
  reply: FastifyReply,
  limits: AuthLimits | undefined,
  requests: TokenRequests | undefined,
  attempt: AuthAttempt | undefined,
): ApiError | undefined {
  if (record === undefined) {
    return new ApiError('invalidToken', undefined, {
      'www-authenticate': `${REALM}, error="invalid_token"`,
      ...(attempt === undefined ? limits?.failures?.failed(request) : attempt.failed()),
    });
  }
  attempt?.release();
  // Set before the checks below, so that the log line of a 429 or 403 names the token too.
  request.token = record;
  // A client that left while its token was looked up is not served: no answer could
  // reach it, and its handler would run on against the database holding no place, since
  // no close would come to give one back. (Fastify skips the rest of a hijacked request.)
  if (reply.raw.destroyed) {
    reply.hijack();
    return undefined;
  }
  if (requests !== undefined) {
    const place = requests.take(record.id);
    if (place === undefined) {
      return new ApiError(
        'tokenBusy',
        `This access token has ${requests.limit} requests in flight, as many as it may have at once; retry once one is answered.`,
      );
    }
    request.inFlight = place;
    reply.raw.on('close', place.closed);
  }
  const limited = limits?.admit(record, reply);
  if (limited !== undefined) return limited;
  if (!record.scopes.includes(scope)) {
    return new ApiError('insufficientScope', `This operation needs the scope "${scope}".`, {
      'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
    });
  }
  return undefined;
}
