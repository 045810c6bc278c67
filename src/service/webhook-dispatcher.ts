import { setMaxListeners } from 'node:events';
import { noMetrics } from '../core/metrics.js';
import { DEFAULT_RETRY_SCHEDULE_MS } from '../core/webhooks/retry-schedule.js';
import type { ClaimedMessage } from '../store/store.js';
import { attempt, type AttemptContext } from './webhook-attempt.js';
import {
  DISPATCH_DEFAULTS,
  type DispatcherOptions,
  type WakeSource,
} from './webhook-dispatch-options.js';
import { EndpointTable, type EndpointSlots, pausedAt } from './webhook-endpoint-slots.js';

export { DISPATCH_DEFAULTS, type DispatcherOptions, type WakeSource };

/** What a lease holds beyond the attempt itself: recording it, and waiting for a slot. */
const LEASE_MARGIN_MS = 5000;
/** An attempt is started only if at least this much of its lease is left after the timeout. */
const FINISH_MARGIN_MS = 2000;
// The least sleep after a claim that took nothing: a message that falls due while its
// endpoint's share is full (a hung receiver's retries), or while its endpoint is disabled,
// wakes the loop for nothing, once per message; this keeps such wakes to 4 a second. Out of
// budget, the loop looks whether it may claim again every BUDGET_LOOK_MS.
const EMPTY_CLAIM_SLEEP_MS = 250;
const BUDGET_LOOK_MS = 100;

/**
 * Sends the webhook messages of the queue: claims due messages with a lease, so that
 * every process may run one and no two send the same attempt at once; sends them, and
 * records each outcome. Woken by a commit that wrote messages (and on PostgreSQL by another
 * process's NOTIFY), it also looks at the queue every `pollMs`. It never rejects: failures of
 * the database are logged and the loop goes on.
 *
 * A slow, hung or failing receiver holds only its own share (core/webhooks/fair-share.ts):
 * each endpoint has a window of attempts in flight, 1 while it fails, growing while it
 * delivers; `maxInFlight` slots are shared fairly among the endpoints with messages in hand;
 * an endpoint with none in flight may always start one. Claims follow the same shares: each
 * claims at most what it may hold (its limit in flight, as many again waiting), so a
 * backlog of messages for a hung receiver is left in the queue rather than claimed, and an
 * endpoint new to the process is claimed one message. An endpoint whose attempts fail is
 * paused between them (250 ms, doubling with each failure in a row, up to a minute, less a
 * random part): none of it is claimed or begun meanwhile, and the loop looks again when the
 * pause ends. A claim the process cannot attempt (too little lease left, stopping) is given
 * back free at once.
 */
export class WebhookDispatcher {
  private readonly options: Required<Omit<DispatcherOptions, 'wakeSources' | 'budget'>> & {
    wakeSources: WakeSource[];
    budget: DispatcherOptions['budget'];
  };
  private readonly endpoints: EndpointTable;
  private readonly running = new Set<Promise<void>>();
  private readonly stopSignal = new AbortController();
  private readonly unsubscribe: (() => void)[] = [];
  private inFlight = 0;
  private closing = false;
  private woken = false;
  private wake: () => void = () => undefined;
  private loop: Promise<void> | undefined;
  private lastHousekeeping = -Infinity;

  constructor(options: DispatcherOptions) {
    this.options = {
      schedule: DEFAULT_RETRY_SCHEDULE_MS,
      now: () => new Date(),
      random: Math.random,
      wakeSources: [],
      metrics: noMetrics,
      budget: undefined,
      ...DISPATCH_DEFAULTS,
      ...options,
    };
    // Every attempt in flight listens for the stop, and with the one each endpoint may always
    // start there can be more than maxInFlight: no leak, so no limit.
    setMaxListeners(0, this.stopSignal.signal);
    this.endpoints = new EndpointTable(
      this.options.maxInFlight,
      this.options.perEndpoint,
      this.options.random,
    );
  }

  get leaseMs(): number {
    return this.options.timeoutMs + LEASE_MARGIN_MS;
  }

  start(): void {
    if (this.loop !== undefined || this.closing) return;
    const { queue, wakeSources } = this.options;
    const signal = () => this.signal();
    for (const source of [queue.onMessages.bind(queue), ...wakeSources]) {
      this.unsubscribe.push(source(signal));
    }
    this.loop = this.run();
  }

  /**
   * Stops claiming; attempts in flight get `graceMs` to finish and be recorded, then are
   * abandoned to their leases. Resolves when nothing of the dispatcher runs any more.
   */
  async stop(graceMs: number): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const unsubscribe of this.unsubscribe.splice(0)) unsubscribe();
    this.options.budget?.cancel();
    this.signal();
    await this.loop;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
    await Promise.race([Promise.allSettled([...this.running]), grace]);
    clearTimeout(timer);
    this.stopSignal.abort();
    for (const endpoint of this.endpoints.values()) {
      for (const message of endpoint.waiting.splice(0)) void this.giveBack(message);
    }
    await Promise.allSettled([...this.running]);
  }

  private signal(): void {
    this.woken = true;
    this.wake();
  }

  private async run(): Promise<void> {
    while (!this.closing) {
      this.woken = false;
      await this.housekeeping();
      // No claims while no attempt may begin: their leases would run out waiting.
      if (this.options.budget?.room() === false) {
        await this.sleep(BUDGET_LOOK_MS);
        continue;
      }
      const limit = this.options.maxInFlight * 2;
      const claimedAt = this.options.now();
      const claimed = await this.claim(claimedAt, limit);
      if (claimed === limit || this.closing) continue;
      const due = await this.untilDue(claimedAt);
      // Signals (an attempt's end, new messages) still wake it at once; the end of a pause
      // wakes it once, not for nothing.
      const wait = claimed === 0 ? Math.max(due, EMPTY_CLAIM_SLEEP_MS) : due;
      await this.sleep(Math.min(wait, this.untilResume()));
    }
  }

  /** Claims up to `limit` messages, at most each endpoint's share; answers how many. */
  private async claim(at: Date, limit: number): Promise<number> {
    const shares = this.endpoints.shares(this.options.now().getTime());
    const { queue, now, log } = this.options;
    let messages: ClaimedMessage[];
    try {
      messages = await queue.claim(at, this.leaseMs, limit, shares);
    } catch (error) {
      log.error({ err: error }, 'claiming webhook messages failed; will retry');
      return 0;
    }
    this.endpoints.add(messages, shares, now().getTime());
    this.pump();
    return messages.length;
  }

  /**
   * Starts waiting messages while their endpoints' limits, the process's slots and the budget
   * allow; out of budget, again once it has room (a lease too short by then: given back).
   */
  private pump(): void {
    const limit = this.endpoints.limits();
    const { maxInFlight, budget } = this.options;
    const now = this.options.now().getTime();
    for (const endpoint of this.endpoints.values()) {
      while (
        endpoint.waiting.length > 0 &&
        !pausedAt(endpoint, now) &&
        endpoint.inFlight < limit(endpoint) &&
        // The one attempt an endpoint may always have, however many others hold.
        (endpoint.inFlight === 0 || this.inFlight < maxInFlight)
      ) {
        if (budget !== undefined && !budget.take()) return budget.later(() => this.pump());
        this.begin(endpoint, endpoint.waiting.shift()!);
      }
    }
  }

  private begin(endpoint: EndpointSlots, message: ClaimedMessage): void {
    endpoint.inFlight++;
    this.inFlight++;
    const begun = this.options.now().getTime();
    const run = this.send(message).then((outcome) => {
      const delivered = outcome === 'unsent' ? undefined : outcome === 'delivered';
      this.endpoints.ended(endpoint, delivered, this.options.now().getTime(), begun);
      this.inFlight--;
      this.running.delete(run);
      if (this.closing) return;
      this.pump();
      // Its share may have room again for messages the last claim left in the queue.
      if (endpoint.more && endpoint.waiting.length === 0) this.signal();
    });
    this.running.add(run);
  }

  /** Makes the attempt; answers whether it delivered, failed, or was not made after all. */
  private async send(message: ClaimedMessage): Promise<'delivered' | 'failed' | 'unsent'> {
    const left = message.claimedUntil.getTime() - this.options.now().getTime();
    // Too little lease left for a whole attempt: another claim, here or elsewhere, sends it.
    if (left < this.options.timeoutMs + FINISH_MARGIN_MS || this.closing) {
      await this.giveBack(message);
      return 'unsent';
    }
    const outcome = await attempt(message, this.context());
    if (outcome === 'abandoned') {
      await this.giveBack(message);
      return 'unsent';
    }
    return outcome === 'delivered' ? 'delivered' : 'failed';
  }

  /**
   * Gives a claim back free (WebhookQueue.release), for any process to take at once; a
   * failure only delays the message to its lease's end.
   */
  private giveBack(message: ClaimedMessage): Promise<void> {
    const { queue, now, log } = this.options;
    const given = queue.release(message.id, message.claimedUntil, now()).then(
      () => undefined,
      (error: unknown) => {
        log.error(
          { err: error, message: message.webhookId },
          'giving back an unattempted webhook claim failed; it waits for its lease to end',
        );
      },
    );
    // Tracked like an attempt, so that stop() waits for it before the store closes.
    const tracked = given.finally(() => this.running.delete(tracked));
    this.running.add(tracked);
    return tracked;
  }

  private context(): AttemptContext {
    const { queue, sender, log, schedule, now, random, metrics } = this.options;
    const signal = this.stopSignal.signal;
    return { queue, sender, log, schedule, now, random, signal, metrics };
  }

  /**
   * How long to sleep after a claim made at `claimedAt` that took less than it might: until
   * the next message falls due after it, at most `pollMs`. What was due by `claimedAt` and
   * the claim left is held back by its endpoint's share (a hung receiver's backlog), or its
   * endpoint is disabled: the end of an attempt here wakes the loop when it makes room (see
   * begin), so such a message waits for that or for the poll. Looking for it every 100 ms
   * kept an idle server busy for as long as a receiver hung (bench/HISTORY.md). Messages
   * committed after the claim's read with an earlier due time (given back by another process,
   * fanned out by another SQLite worker) and a claim that failed wait for the poll too.
   */
  private async untilDue(claimedAt: Date): Promise<number> {
    try {
      const due = await this.options.queue.nextDue(claimedAt);
      if (due === null) return this.options.pollMs;
      const wait = due.getTime() - this.options.now().getTime();
      return Math.min(Math.max(wait, 0), this.options.pollMs);
    } catch (error) {
      this.options.log.error({ err: error }, 'looking for due webhook messages failed');
      return this.options.pollMs;
    }
  }

  /** How long until an endpoint's pause ends that has messages to send then. */
  private untilResume(): number {
    const now = this.options.now().getTime();
    return Math.max(0, this.endpoints.nextResume(now) - now);
  }

  /** Resolves after `ms`, or at once when signalled (now or while sleeping). */
  private async sleep(ms: number): Promise<void> {
    if (this.woken || this.closing) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.wake(), ms);
      this.wake = () => {
        this.wake = () => undefined;
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** Deletes what is past retention and disables endpoints that only fail, once a while. */
  private async housekeeping(): Promise<void> {
    const now = this.options.now();
    const { queue, log, retentionMs, disableAfterMs, housekeepingMs } = this.options;
    if (now.getTime() - this.lastHousekeeping < housekeepingMs) return;
    this.lastHousekeeping = now.getTime();
    this.endpoints.forget(now.getTime() - housekeepingMs);
    try {
      const purged = await queue.purge(new Date(now.getTime() - retentionMs));
      const disabled = await queue.disableFailing(new Date(now.getTime() - disableAfterMs), now);
      if (purged > 0) log.info({ purged }, 'deleted webhook messages past their retention');
      if (disabled > 0) log.warn({ disabled }, 'disabled webhook endpoints that only failed');
    } catch (error) {
      log.error({ err: error }, 'webhook housekeeping failed; will retry');
    }
  }
}
