import type { FastifyReply, FastifyRequest } from 'fastify';
import { addressKey } from '../../core/address-key.js';
import { ApiError } from '../../core/errors.js';
import type { RateLimitPolicy } from '../../core/rate-limit.js';
import type { Reservation, WindowCounts } from '../../core/window-counts.js';
import type { TokenRecord } from '../../core/tokens.js';
import type { RateLimitCounts } from '../../service/rate-limit-sync.js';
import type { AuthAttempt, AuthLimits, FailureLimit } from './auth.js';
import { limitField, policyField } from '../../api/rate-limit-fields.js';

/** One policy with its counts and its preformatted fields. */
class Limited<K extends string | number> {
  readonly policy: RateLimitPolicy;
  readonly policyField: string;
  readonly limitField: (remaining: number, reset: number) => string;

  constructor(readonly counts: WindowCounts<K>) {
    const policy = counts.policy;
    this.policy = policy;
    this.policyField = policyField(policy);
    this.limitField = limitField(policy);
  }

  /** The fields of an answer with `remaining` left, plus Retry-After when refused. */
  headers(remaining: number, reset: number, refused: boolean): Record<string, string> {
    return {
      'ratelimit-policy': this.policyField,
      ratelimit: this.limitField(remaining, reset),
      ...(refused && { 'retry-after': String(reset) }),
    };
  }

  describe(reset: number): string {
    const { quota, windowSeconds } = this.policy;
    return `${quota} per ${windowSeconds} s; retry in ${reset} s.`;
  }
}

/**
 * Failed authentications per client address. The `r` a 401 reports counts the address's
 * checks still in flight as failures: it is what a request sent now would find left.
 */
class AddressLimit implements FailureLimit {
  constructor(
    private readonly addresses: Limited<string>,
    private readonly now: () => number,
  ) {}

  attempt(request: FastifyRequest): ApiError | AuthAttempt {
    const nowMs = this.now();
    const reservation = this.addresses.counts.reserve(addressKey(request.ip), nowMs);
    if (reservation !== undefined) return new HeldFailure(this, reservation);
    const reset = this.addresses.counts.resetSeconds(nowMs);
    return new ApiError(
      'authFailureRateLimited',
      `Too many failed authentications from this client address: ${this.addresses.describe(reset)}`,
      this.addresses.headers(0, reset, true),
    );
  }

  failed(request: FastifyRequest): Record<string, string> {
    const nowMs = this.now();
    return this.headers(this.addresses.counts.add(addressKey(request.ip), nowMs), nowMs);
  }

  confirm(reservation: Reservation<string>): Record<string, string> {
    const nowMs = this.now();
    return this.headers(this.addresses.counts.confirm(reservation, nowMs), nowMs);
  }

  release(reservation: Reservation<string>): void {
    this.addresses.counts.release(reservation);
  }

  private headers(remaining: number, nowMs: number): Record<string, string> {
    return this.addresses.headers(remaining, this.addresses.counts.resetSeconds(nowMs), false);
  }
}

/** An authentication being checked, holding a failure of its address (see auth.ts). */
class HeldFailure implements AuthAttempt {
  constructor(
    private readonly limit: AddressLimit,
    private readonly reservation: Reservation<string>,
  ) {}

  failed(): Record<string, string> {
    return this.limit.confirm(this.reservation);
  }

  release(): void {
    this.limit.release(this.reservation);
  }
}

/** The rate limits of authentication (see auth.ts for where each is asked). */
class RequestLimits implements AuthLimits {
  readonly failures: AddressLimit | undefined;

  constructor(
    private readonly tokens: Limited<number> | undefined,
    addresses: Limited<string> | undefined,
    private readonly now: () => number,
  ) {
    this.failures = addresses && new AddressLimit(addresses, now);
  }

  admit(record: TokenRecord, reply: FastifyReply): ApiError | undefined {
    const tokens = this.tokens;
    if (tokens === undefined) return undefined;
    const nowMs = this.now();
    const remaining = tokens.counts.take(record.id, nowMs);
    const reset = tokens.counts.resetSeconds(nowMs);
    if (remaining < 0) {
      return new ApiError(
        'tokenRateLimited',
        `This access token has used up its rate limit of ${tokens.describe(reset)}`,
        tokens.headers(0, reset, true),
      );
    }
    reply.header('ratelimit-policy', tokens.policyField);
    reply.header('ratelimit', tokens.limitField(remaining, reset));
    return undefined;
  }
}

/** The rate limits of an app, counting in `counts`: undefined when both are off. */
export function rateLimits(
  counts: RateLimitCounts,
  now: () => number = Date.now,
): AuthLimits | undefined {
  const tokens = counts.tokens && new Limited(counts.tokens);
  const addresses = counts.addresses && new Limited(counts.addresses);
  if (tokens === undefined && addresses === undefined) return undefined;
  return new RequestLimits(tokens, addresses, now);
}
