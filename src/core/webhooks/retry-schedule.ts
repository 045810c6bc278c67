import { parseDuration } from '../tokens.js';

/**
 * When a failed message is tried again. The first attempt is made at once; the schedule
 * lists the delays before each further attempt, so the default makes eight attempts over
 * about 27 hours (Svix's schedule, which is what receivers of Svix, Stripe or GitHub
 * webhooks are used to).
 */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [
  5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
];

/** Each delay is spread over ±20% so that a receiver's backlog does not come back at once. */
export const JITTER = 0.2;

/** A receiver's Retry-After is obeyed up to this, so a message is never parked for ever. */
export const RETRY_AFTER_MAX_MS = 86_400_000;

/** At most this many further attempts may be scheduled. */
const MAX_RETRIES = 50;

/**
 * Parses `--webhook-retry-schedule`: comma-separated delays such as `5s,5m,30m,2h`
 * (`0s` for at once). Throws with a message a user can act on.
 */
export function parseRetrySchedule(text: string): number[] {
  const items = text.split(',').map((item) => item.trim());
  if (items.length > MAX_RETRIES) {
    throw new Error(`a retry schedule has at most ${MAX_RETRIES} delays`);
  }
  return items.map((item) => (item === '0' || item === '0s' ? 0 : parseDuration(item)));
}

/** `5000` -> `5s`: the largest unit that divides it, for help texts and logs. */
export function formatDelay(ms: number): string {
  const units = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ] as const;
  for (const [unit, size] of units) if (ms % size === 0 && ms > 0) return `${ms / size}${unit}`;
  return ms === 0 ? '0s' : `${ms}ms`;
}

export interface RetryInput {
  /** 1-based number of the attempt that just failed. */
  attempt: number;
  now: Date;
  /** What the receiver asked for with Retry-After on a 429 or 503, if anything. */
  retryAfterMs: number | null;
}

/**
 * When to try a message again after its `attempt`-th attempt failed, or null when that was
 * the last attempt the schedule allows. `random` is in [0, 1), injected for tests.
 */
export function nextAttemptAt(
  schedule: readonly number[],
  { attempt, now, retryAfterMs }: RetryInput,
  random: () => number = Math.random,
): Date | null {
  const base = schedule[attempt - 1];
  if (base === undefined) return null;
  const jittered = Math.round(base * (1 - JITTER + 2 * JITTER * random()));
  const asked = retryAfterMs === null ? 0 : Math.min(retryAfterMs, RETRY_AFTER_MAX_MS);
  return new Date(now.getTime() + Math.max(jittered, asked));
}
