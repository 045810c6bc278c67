import type { Log } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import type { WebhookSender } from '../core/webhooks/delivery.js';
import type { WebhookQueue } from '../store/store.js';

// How a WebhookDispatcher is set up: what it works with, and the bounds and periods the
// command line can change (src/cli/webhook-options.ts shows the defaults).

/** Subscribes a wake-up listener; answers the function that unsubscribes it. */
export type WakeSource = (listener: () => void) => () => void;

export interface DispatcherOptions {
  queue: WebhookQueue;
  sender: WebhookSender;
  log: Log;
  /** The sender's timeout: a lease must outlast an attempt. */
  timeoutMs: number;
  schedule?: readonly number[];
  /** Delivered and failed messages are deleted this long after they ended. */
  retentionMs?: number;
  /** Endpoints with nothing but failures for this long are disabled. */
  disableAfterMs?: number;
  /**
   * Attempts in flight in this process, shared fairly among the endpoints with messages in
   * hand; an endpoint with none in flight may always start one, even beyond this.
   */
  maxInFlight?: number;
  /**
   * The most attempts one endpoint may have in flight: its window starts at 1, grows with
   * deliveries up to this, and falls back to 1 when an attempt fails (see
   * core/webhooks/fair-share.ts).
   */
  perEndpoint?: number;
  /** With no wake-up, the queue is looked at this often anyway. */
  pollMs?: number;
  housekeepingMs?: number;
  /** Other processes' writes (PostgreSQL LISTEN); the queue's own is always listened to. */
  wakeSources?: WakeSource[];
  now?: () => Date;
  random?: () => number;
  /** Where attempts are counted; nothing is measured by default. */
  metrics?: Metrics;
  /**
   * How many attempts may begin, when the process is busy (service/delivery-budget.ts);
   * without one, as many as the shares allow.
   */
  budget?: AttemptBudget;
}

/** Whether one more attempt may begin now; if not, `later` calls back once it may. */
export interface AttemptBudget {
  take(): boolean;
  /** Whether `take` would answer true now, taking nothing. */
  room(): boolean;
  /** Calls `retry` once the budget has room (one call pending at most; others dropped). */
  later(retry: () => void): void;
  /** Drops the pending call: the dispatcher is stopping. */
  cancel(): void;
}

const DAY_MS = 86_400_000;
export const DISPATCH_DEFAULTS = {
  retentionMs: 30 * DAY_MS,
  disableAfterMs: 5 * DAY_MS,
  maxInFlight: 64,
  perEndpoint: 16,
  pollMs: 1000,
  housekeepingMs: 60_000,
} as const;
