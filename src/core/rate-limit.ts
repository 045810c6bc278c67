/**
 * Rate limits: `quota` requests per fixed window of `windowSeconds`. Windows are aligned
 * to the Unix epoch (a 60 s window starts on every whole minute), so every process and
 * every instance agrees on which window a moment belongs to without talking to the others.
 */
export interface RateLimit {
  readonly quota: number;
  readonly windowSeconds: number;
}

/** A limit with the name clients see in the RateLimit and RateLimit-Policy fields. */
export interface RateLimitPolicy extends RateLimit {
  readonly name: string;
}

/** Policy names, as the RateLimit and RateLimit-Policy fields give them. */
export const TOKEN_POLICY = 'token';
export const FAILED_AUTH_POLICY = 'failed-auth';

/** The two limits; null turns one off. */
export interface RateLimitOptions {
  /** Requests per token: every request that presents a valid token counts. */
  perToken: RateLimit | null;
  /** Failed authentications (401) per client address. */
  authFailures: RateLimit | null;
}

/**
 * Generous by default, so that no ordinary client meets them: 100,000 requests a minute
 * per token (about 1,700 a second for a whole minute: a runaway loop or a leaked token is
 * held to that, a busy integration is not), and 100 failed authentications a minute per
 * address (a client with a mistyped or revoked token fails a few times and stops; a
 * guesser gets 144,000 tries a day against 256-bit tokens).
 */
export const DEFAULT_RATE_LIMITS: RateLimitOptions = {
  perToken: { quota: 100_000, windowSeconds: 60 },
  authFailures: { quota: 100, windowSeconds: 60 },
};

export const MAX_QUOTA = 1_000_000_000;
export const MAX_WINDOW_SECONDS = 86_400;

const UNIT_SECONDS = { s: 1, m: 60, h: 3_600, d: 86_400 } as const;
const LIMIT = /^([1-9][0-9]{0,9})\/([1-9][0-9]{0,5})([smhd])$/;

/**
 * Parses `100/60s`, `5000/1h`, `100000/1m` (requests, a slash, a window with its unit),
 * or `off` (null). Throws with a message a user can act on.
 */
export function parseRateLimit(text: string): RateLimit | null {
  if (text === 'off') return null;
  const match = LIMIT.exec(text);
  if (match === null) {
    throw new Error(
      `"${text}" is not a rate limit; use requests/window such as 100/60s, 5000/1h, or off`,
    );
  }
  const quota = Number(match[1]);
  const windowSeconds = Number(match[2]) * UNIT_SECONDS[match[3] as keyof typeof UNIT_SECONDS];
  if (quota > MAX_QUOTA) throw new Error(`"${text}": at most ${MAX_QUOTA} requests a window`);
  if (windowSeconds > MAX_WINDOW_SECONDS) throw new Error(`"${text}": the window is at most 1d`);
  return { quota, windowSeconds };
}

/** The inverse of parseRateLimit, for logs and help texts: `100/60s` or `off`. */
export const formatRateLimit = (limit: RateLimit | null): string =>
  limit === null ? 'off' : `${limit.quota}/${limit.windowSeconds}s`;

/** Start, in Unix seconds, of the window of `windowSeconds` that holds the instant `nowMs`. */
export const windowStart = (nowMs: number, windowSeconds: number): number =>
  Math.floor(nowMs / (windowSeconds * 1_000)) * windowSeconds;

/**
 * Whole seconds until that window ends, rounded up (at least 1): what `t` in the RateLimit
 * field and Retry-After say, so a client waiting that long is in the next window.
 */
export const secondsLeft = (nowMs: number, windowSeconds: number): number =>
  Math.max(
    1,
    Math.ceil(((windowStart(nowMs, windowSeconds) + windowSeconds) * 1_000 - nowMs) / 1_000),
  );
