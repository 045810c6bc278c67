import type { Log } from '../core/log.js';
import type { EventLog } from '../store/store.js';

export const SEQUENCER_DEFAULTS = {
  /** Events one run numbers at most: one short transaction's worth. */
  batch: 1000,
  /** With no wake-up, the queue is looked at this often anyway. */
  pollMs: 1000,
} as const;

export interface SequencerOptions {
  log: Log;
  batch?: number;
  pollMs?: number;
}

/**
 * Makes the events of plant writes readable where the store numbers them after their commit
 * (EventLog.sequence: PostgreSQL, see the migration 0011_plant_events.sql). Woken by each
 * commit of this process that queued an event, it runs until the queue is empty, one run at a
 * time (a wake-up during a run makes one more); it also looks every `pollMs`, for events a
 * process left that stopped or failed before its run. Runs of all processes take turns under
 * the store's lock. It never rejects: a failure is logged, the events stay queued, and it tries
 * again at the next wake-up or poll. Does nothing on a store that numbers events as they
 * commit (SQLite).
 */
export class EventSequencer {
  private readonly batch: number;
  private readonly pollMs: number;
  private running: Promise<void> | undefined;
  /** The run that starts when the one under way ends, shared by the wake-ups meanwhile. */
  private next: Promise<void> | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly events: EventLog,
    private readonly options: SequencerOptions,
  ) {
    this.batch = options.batch ?? SEQUENCER_DEFAULTS.batch;
    this.pollMs = options.pollMs ?? SEQUENCER_DEFAULTS.pollMs;
  }

  start(): void {
    if (this.events.sequence === undefined || this.timer !== undefined || this.stopped) return;
    this.unsubscribe = this.events.onUnsequenced?.(() => void this.wake());
    this.timer = setInterval(() => void this.wake(), this.pollMs).unref();
    void this.wake();
  }

  /** Stops waking; the runs under way finish, and one last run numbers what is queued. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.timer);
    this.unsubscribe?.();
    await this.next;
    await this.running;
    if (this.timer !== undefined) await this.drain();
  }

  /**
   * Resolves once a run that started after this call has found the queue empty (or failed):
   * every event committed before the call is then readable. Runs one at a time; the calls
   * during a run share the one after it.
   */
  wake(): Promise<void> {
    if (this.events.sequence === undefined) return Promise.resolve();
    if (this.running === undefined) return this.run();
    this.next ??= this.running.then(() => {
      this.next = undefined;
      return this.run();
    });
    return this.next;
  }

  private run(): Promise<void> {
    const running = this.drain().finally(() => {
      if (this.running === running) this.running = undefined;
    });
    this.running = running;
    return running;
  }

  private async drain(): Promise<void> {
    const sequence = this.events.sequence?.bind(this.events);
    if (sequence === undefined) return;
    try {
      while ((await sequence(this.batch)) === this.batch);
    } catch (error) {
      this.options.log.error({ err: error }, 'numbering the events of the feed failed; will retry');
    }
  }
}
