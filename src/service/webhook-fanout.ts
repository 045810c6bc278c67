import type { Log } from '../core/log.js';
import type { FanOutStep, WebhookEvents } from '../store/store.js';

export const FAN_OUT_DEFAULTS = {
  /** Messages one fan-out writes at most: one short transaction's worth. */
  maxMessages: 1000,
  /** With no wake-up, the events are looked at this often anyway. */
  pollMs: 1000,
  /**
   * The part of the time a fan-out with a backlog takes at most while other work uses the
   * database (see WebhookFanOut).
   */
  share: 0.1,
} as const;

export interface FanOutOptions {
  events: WebhookEvents;
  log: Log;
  maxMessages?: number;
  pollMs?: number;
  share?: number;
  /** A monotonic clock in ms, which times the batches. */
  now?: () => number;
}

/**
 * How far back the share is kept: a fan-out may take `share` of this in one burst. Kept over
 * one second, the burst (100 ms) was shorter than one batch on a machine busy with several
 * times its cores' work (250 to 350 ms of statements): each such batch paused the fan-out 2
 * to 3 s, and the messages of the writes made meanwhile waited for it
 * (test/process/webhooks-fairness.test.ts).
 */
const SHARE_WINDOW_MS = 3000;

/**
 * Fans out the events of the log (plant writes' audit entries) into messages, a bounded batch
 * at a time (WebhookEvents.fanOut), so that a write costs the same however many endpoints
 * there are. Every `serve` process runs one; on PostgreSQL they share the endpoints (each
 * batch moves an endpoint only from where it read it). Woken by each commit of this process
 * that wrote a plant, ended a message or changed an endpoint, it also looks every `pollMs`,
 * for what other processes did. While no endpoint has room for messages (none, or every one
 * holding its most, as one that never answers does), a plant write does not wake it: only
 * the end of a message, a change of an endpoint, or the poll. The store wakes the dispatcher
 * when a batch wrote messages.
 *
 * With a backlog (many endpoints, a burst of writes), it takes at most `share` of the time,
 * wake-ups or not, so that the work of the messages never starves the writes that record
 * events: its batches spend a budget that refills at `share` ms a ms, up to `share` of
 * three seconds, and once it is spent the next batch waits for it. What a batch spent
 * waiting for others (FanOutStep.waitedMs) is not counted. Single writes, far apart, never
 * wait. Where the store tells whether other work uses the database
 * (WebhookEvents.othersBusy), a batch during which none did spends nothing: the fan-out may
 * take the time nobody wants. It never rejects: a failure (the database down) is logged,
 * the events stay where they are, and it tries again at the next wake-up or poll.
 */
export class WebhookFanOut {
  private readonly options: Required<FanOutOptions>;
  private closing = false;
  private woken = false;
  /** Whether an endpoint had room at the last fan-out: new events are worth a look. */
  private room = true;
  private wake: () => void = () => undefined;
  private unsubscribe: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  /** The time left to spend on batches, in ms (below 0: overspent), as of `refilled`. */
  private budget: number;
  private refilled: number;

  constructor(options: FanOutOptions) {
    this.options = { ...FAN_OUT_DEFAULTS, now: () => performance.now(), ...options };
    this.budget = this.options.share * SHARE_WINDOW_MS;
    this.refilled = this.options.now();
  }

  start(): void {
    if (this.loop !== undefined || this.closing) return;
    this.unsubscribe = this.options.events.onEvents((why) => {
      if (why === 'room' || this.room) this.signal();
    });
    this.loop = this.run();
  }

  /** Stops; a batch under way finishes (one statement) first. */
  async stop(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.unsubscribe?.();
    this.signal();
    await this.loop;
  }

  private signal(): void {
    this.woken = true;
    this.wake();
  }

  private async run(): Promise<void> {
    while (!this.closing) {
      this.woken = false;
      this.refill();
      const started = this.options.now();
      const busyBefore = this.othersBusy();
      const step = await this.step();
      this.refill();
      if (busyBefore || this.othersBusy()) {
        this.budget -= Math.max(0, this.options.now() - started - (step?.waitedMs ?? 0));
      }
      if (step !== undefined) this.room = step.room;
      if (step !== undefined && step.endpoints > 0) {
        // More may wait: go on, once the budget is back to nothing overspent.
        if (this.budget < 0) await this.sleep(-this.budget / this.options.share, false);
      } else {
        await this.sleep(this.options.pollMs, true);
      }
    }
  }

  private othersBusy(): boolean {
    return this.options.events.othersBusy?.() ?? true;
  }

  private refill(): void {
    const { now, share } = this.options;
    const at = now();
    this.budget = Math.min(share * SHARE_WINDOW_MS, this.budget + (at - this.refilled) * share);
    this.refilled = at;
  }

  private async step(): Promise<FanOutStep | undefined> {
    try {
      return await this.options.events.fanOut(this.options.maxMessages);
    } catch (error) {
      this.options.log.error(
        { err: error },
        'fanning out webhook events failed; they are kept, and fanned out later',
      );
      return undefined;
    }
  }

  /**
   * Resolves after `ms`; at once when stopping, and when signalled (now or meanwhile) if
   * `wakeable`.
   */
  private async sleep(ms: number, wakeable: boolean): Promise<void> {
    if (this.closing || (wakeable && this.woken)) return;
    await new Promise<void>((resolve) => {
      // Named: the unit test tells its timers from others' by it.
      const fanOutResume = () => {
        this.wake = () => undefined;
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(fanOutResume, ms);
      this.wake = () => {
        if (wakeable || this.closing) fanOutResume();
      };
    });
  }
}
