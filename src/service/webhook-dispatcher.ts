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

export { DISPATCH_DEFAULTS, type DispatcherOptions, type WakeSource };

/** What a lease holds beyond the attempt itself: recording it, and waiting for a slot. */
const LEASE_MARGIN_MS = 5000;
/** An attempt is started only if at least this much of its lease is left after the timeout. */
const FINISH_MARGIN_MS = 2000;
/** An endpoint at its share that has finished nothing for this long is taken as stuck. */
const STUCK_MS = 1000;
/** The shortest pause between two looks at a queue whose due messages are all leased. */
const MIN_SLEEP_MS = 100;
/** A loop waiting for room claims again once there is room for this many. */
const LOW_WATER = 16;

interface Endpoint {
  inFlight: number;
  waiting: ClaimedMessage[];
  /** When an attempt of it last ended (or it was first seen), epoch ms. */
  progress: number;
}

const heldBy = (endpoint: Endpoint) => endpoint.inFlight + endpoint.waiting.length;

/**
 * Sends the webhook messages of the outbox: claims due messages with a lease, so that
 * every process may run one and no two send the same attempt at once; sends them with a
 * bounded number in flight (per process and per endpoint), and records each outcome.
 * Woken by a commit that wrote messages (and on PostgreSQL by another process's NOTIFY),
 * it also looks at the queue every `pollMs`. It never rejects: failures of the database
 * are logged and the loop goes on.
 *
 * A process holds at most twice `maxInFlight` claimed messages, and one endpoint at most
 * half of those, so a hung receiver holds only its share. The claims of an endpoint beyond
 * its share are not sent but given back with their lease kept (sent later, here or
 * elsewhere, and not counted as attempts); that only happens once the endpoint is stuck, so
 * a fast receiver with a backlog waits for its own slots instead. A claim the process
 * cannot attempt (too little lease left, stopping) is given back free at once.
 */
export class WebhookDispatcher {
  private readonly options: Required<Omit<DispatcherOptions, 'wakeSources'>> & {
    wakeSources: WakeSource[];
  };
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly running = new Set<Promise<void>>();
  private readonly stopSignal = new AbortController();
  private readonly unsubscribe: (() => void)[] = [];
  private inFlight = 0;
  private held = 0;
  private closing = false;
  private woken = false;
  private waitingForRoom = false;
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
      ...DISPATCH_DEFAULTS,
      ...options,
    };
    // Every attempt in flight listens for the stop; that many listeners is no leak.
    setMaxListeners(this.options.maxInFlight + 16, this.stopSignal.signal);
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
    this.signal();
    await this.loop;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
    await Promise.race([Promise.allSettled([...this.running]), grace]);
    clearTimeout(timer);
    this.stopSignal.abort();
    for (const endpoint of this.endpoints.values()) {
      for (const message of endpoint.waiting.splice(0)) void this.giveBack(message, 'free');
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
      const limit = this.claimLimit();
      if (limit === 0) {
        this.waitingForRoom = true;
        await this.sleep(Math.min(this.options.pollMs, STUCK_MS));
        this.waitingForRoom = false;
        continue;
      }
      const claimed = await this.claim(limit);
      if (claimed === limit || this.closing) continue;
      await this.sleep(await this.untilDue());
    }
  }

  /** How many messages to claim now (see the class comment). */
  private claimLimit(): number {
    const { maxInFlight } = this.options;
    const room = maxInFlight * 2 - this.held;
    if (room <= 0) return 0;
    let fullest: Endpoint | undefined;
    for (const endpoint of this.endpoints.values()) {
      if (fullest === undefined || heldBy(endpoint) > heldBy(fullest)) fullest = endpoint;
    }
    const spare = maxInFlight - (fullest === undefined ? 0 : heldBy(fullest));
    if (spare > 0) return Math.min(room, spare);
    const stuck = Date.now() - fullest!.progress >= STUCK_MS;
    return stuck ? room : 0;
  }

  /** Claims up to `limit` messages and starts what the bounds allow; answers how many. */
  private async claim(limit: number): Promise<number> {
    let messages: ClaimedMessage[];
    try {
      messages = await this.options.queue.claim(this.options.now(), this.leaseMs, limit);
    } catch (error) {
      this.options.log.error({ err: error }, 'claiming webhook messages failed; will retry');
      return 0;
    }
    for (const message of messages) this.hold(message);
    this.pump();
    return messages.length;
  }

  private hold(message: ClaimedMessage): void {
    const key = message.endpoint.id.toString();
    const endpoint = this.endpoints.get(key) ?? { inFlight: 0, waiting: [], progress: Date.now() };
    this.endpoints.set(key, endpoint);
    if (heldBy(endpoint) >= this.options.maxInFlight) {
      // Kept leased, so that the next claims pass over it to other endpoints.
      void this.giveBack(message, 'leased');
      return;
    }
    endpoint.waiting.push(message);
    this.held++;
  }

  /** Starts waiting messages while the process and their endpoints have room. */
  private pump(): void {
    for (const [key, endpoint] of this.endpoints) {
      while (
        endpoint.waiting.length > 0 &&
        endpoint.inFlight < this.options.perEndpoint &&
        this.inFlight < this.options.maxInFlight
      ) {
        this.begin(endpoint, endpoint.waiting.shift()!);
      }
      if (heldBy(endpoint) === 0) this.endpoints.delete(key);
    }
  }

  private begin(endpoint: Endpoint, message: ClaimedMessage): void {
    endpoint.inFlight++;
    this.inFlight++;
    const run = this.send(message).finally(() => {
      endpoint.inFlight--;
      endpoint.progress = Date.now();
      this.inFlight--;
      this.held--;
      this.running.delete(run);
      if (!this.closing) this.pump();
      if (this.waitingForRoom && this.claimLimit() >= LOW_WATER) this.signal();
    });
    this.running.add(run);
  }

  private async send(message: ClaimedMessage): Promise<void> {
    const left = message.claimedUntil.getTime() - this.options.now().getTime();
    // Too little lease left for a whole attempt: another claim, here or elsewhere, sends it.
    if (left < this.options.timeoutMs + FINISH_MARGIN_MS || this.closing) {
      await this.giveBack(message, 'free');
      return;
    }
    if ((await attempt(message, this.context())) === 'abandoned') {
      await this.giveBack(message, 'free');
    }
  }

  /** See WebhookQueue.release; a failure only delays the message to its lease's end. */
  private giveBack(message: ClaimedMessage, lease: 'free' | 'leased'): Promise<void> {
    const { queue, now, log } = this.options;
    const freeAt = lease === 'free' ? now() : message.claimedUntil;
    const given = queue.release(message.id, message.claimedUntil, freeAt).then(
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
   * How long to sleep: until the next message is due, at most `pollMs`. A message due
   * already that the last claim did not get is leased elsewhere (or here): it is looked at
   * again after a short pause rather than in a busy loop.
   */
  private async untilDue(): Promise<number> {
    try {
      const due = await this.options.queue.nextDue();
      if (due === null) return this.options.pollMs;
      const wait = due.getTime() - this.options.now().getTime();
      return Math.min(Math.max(wait, MIN_SLEEP_MS), this.options.pollMs);
    } catch (error) {
      this.options.log.error({ err: error }, 'looking for due webhook messages failed');
      return this.options.pollMs;
    }
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
    if (now.getTime() - this.lastHousekeeping < this.options.housekeepingMs) return;
    this.lastHousekeeping = now.getTime();
    const { queue, log, retentionMs, disableAfterMs } = this.options;
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
