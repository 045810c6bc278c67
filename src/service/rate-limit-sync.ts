import type { Log } from '../core/log.js';
import { FAILED_AUTH_POLICY, type RateLimitOptions, TOKEN_POLICY } from '../core/rate-limit.js';
import { WindowCounts } from '../core/window-counts.js';
import type { RateLimitStore } from '../store/store.js';

/** How often a process adds its counts to the shared store and learns the totals. */
export const SYNC_INTERVAL_MS = 250;

/** How often a process deletes ended windows from the shared store. */
export const PURGE_INTERVAL_MS = 60_000;

/** Windows are purged this long after their end, so clocks a little apart do not matter. */
const PURGE_GRACE_SECONDS = 60;

/** What the two limits have counted in this process; a limit turned off has none. */
export interface RateLimitCounts {
  readonly tokens?: WindowCounts<number>;
  readonly addresses?: WindowCounts<string>;
}

export function rateLimitCounts(options: RateLimitOptions): RateLimitCounts {
  return {
    ...(options.perToken !== null && {
      tokens: new WindowCounts<number>({ name: TOKEN_POLICY, ...options.perToken }),
    }),
    ...(options.authFailures !== null && {
      addresses: new WindowCounts<string>({ name: FAILED_AUTH_POLICY, ...options.authFailures }),
    }),
  };
}

/**
 * The background loop that shares rate-limit counts between processes: every
 * SYNC_INTERVAL_MS it drains what each policy counted, adds it to the shared totals in
 * one statement, and hands the totals back. Requests never wait on it. When the store
 * fails, the counts are kept for the next round and every process goes on limiting with
 * what it knows (its own counts, the last totals): it fails open, and never fails a
 * request. Without a store (SQLite) it only forgets windows that have ended.
 */
export class RateLimitSync {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private running = false;
  private failing = false;
  private lastPurge = 0;
  private readonly counts: readonly WindowCounts<string | number>[];

  constructor(
    counts: RateLimitCounts,
    private readonly store: RateLimitStore | undefined,
    private readonly log: Log,
    private readonly now: () => number = Date.now,
  ) {
    this.counts = [counts.tokens, counts.addresses].filter((c) => c !== undefined) as WindowCounts<
      string | number
    >[];
  }

  start(): void {
    this.timer ??= setInterval(() => void this.tick(), SYNC_INTERVAL_MS).unref();
  }

  /** Stops the rounds; one under way finishes without a word (the store may be closing). */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round; a round still waiting on the store makes this one a no-op. */
  async tick(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const nowMs = this.now();
      if (this.store === undefined) {
        for (const counts of this.counts) counts.prune(nowMs);
      } else {
        await this.share(this.store, nowMs);
      }
    } finally {
      this.running = false;
    }
  }

  private async share(store: RateLimitStore, nowMs: number): Promise<void> {
    const pending = this.counts.flatMap((counts) =>
      counts.drain(nowMs).map((count) => ({
        policy: counts.policy.name,
        windowEnd: count.windowStart + counts.policy.windowSeconds,
        ...count,
      })),
    );
    try {
      const totals = pending.length === 0 ? [] : await store.add(pending);
      for (const counts of this.counts) {
        counts.settle(totals.filter((total) => total.policy === counts.policy.name));
      }
      if (nowMs - this.lastPurge >= PURGE_INTERVAL_MS) {
        this.lastPurge = nowMs;
        await store.purge(Math.floor(nowMs / 1_000) - PURGE_GRACE_SECONDS);
      }
      if (this.failing) this.log.info({}, 'rate-limit counts are shared again');
      this.failing = false;
    } catch (error) {
      for (const counts of this.counts) counts.restore();
      if (!this.failing && !this.stopped) {
        this.log.warn(
          { err: error },
          'rate-limit counts cannot be shared (database unavailable); limiting per process meanwhile',
        );
      }
      this.failing = true;
    }
  }
}
