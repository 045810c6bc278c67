import { type ChangeEvent, EVENT_LIMITS } from '../core/change-events.js';
import { eventsPastHead, eventsPruned, noEventStreamLeft } from '../core/event-errors.js';
import { type Log, silentLog } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { SharedSlots } from '../core/shared-slots.js';
import type { EventLog, HandedEvents } from '../store/store.js';
import { type FeedCursor, RecentEvents } from './recent-events.js';

/** With no wake-up, the log is looked at this often while anyone waits. */
export const FEED_POLL_MS = 1000;

/**
 * Looks at the log start, and waiters are woken, at most this often: under a burst of
 * writes, one look takes the events of many and a stream sends them in one write, so that
 * followers cost the writers a bounded number of reads and wake-ups a second.
 */
export const LOOK_EVERY_MS = 15;

export interface EventFeedOptions {
  /** Streams and long polls open at once, at most; more are refused (503). */
  maxStreams?: number;
  /** A heartbeat on an idle stream, a check of a stream's token, this often (tests shorten). */
  heartbeatMs?: number;
  tokenCheckMs?: number;
  /** Makes every event committed so far readable before a page is read (EventLog.settle): a
   * write answered before a page is asked for is on it. */
  settle?: () => Promise<void>;
  log?: Log;
  /** Told the number of streams and long polls open whenever it changes. */
  metrics?: Pick<Metrics, 'eventStreams'>;
}

/** A page of the feed and where the next one starts. */
export interface FeedPage {
  /** The cursor the page was read after: `after`, or the horizon when none was given. */
  start: bigint;
  events: ChangeEvent[];
  /** The cursor of the next page: the last position of this one, or where it started. */
  next: bigint;
}

/** `wake(true)`: an event after `after` is known; `wake(false)`: stop waiting (closing). */
type Waiter = { after: bigint; wake: (found: boolean) => void };

/**
 * The changes feed (GET /events) over the store's log: pages read from the database, and, for
 * the streams and long polls that wait for what comes next, one shared look at the log per
 * wake-up (the store's, after a commit here or a NOTIFY or a new data_version from another
 * process; and once a second while anyone waits). What open streams have yet to read is
 * kept in memory: a thousand streams up to date cost one read of the database per change;
 * the events of this process's own commits, where the store hands them over (SQLite), none
 * while they follow what the feed holds. Shares `maxStreams` slots among the tokens of the
 * streams and long polls open.
 */
export class EventFeed {
  readonly maxStreams: number;
  readonly heartbeatMs: number;
  readonly tokenCheckMs: number;
  private readonly log: Log;
  private readonly settle: () => Promise<void>;
  private readonly recent = new RecentEvents();
  private started: Promise<void> | undefined;
  private refreshing: Promise<void> | undefined;
  private again = false;
  /** A look has started and not read the log yet: it will read whatever commits meanwhile. */
  private lookPending = false;
  /** When the log was last looked at or the waiters last woken (performance.now()). */
  private lastLook = -Infinity;
  /** A wake-up of the waiters put off until LOOK_EVERY_MS after the last. */
  private wakeTimer: NodeJS.Timeout | undefined;
  /** An append was heard while nobody waited: `head` may be behind the log. */
  private stale = false;
  private readonly waiters = new Set<Waiter>();
  private readonly slots: SharedSlots<number>;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly events: EventLog,
    options: EventFeedOptions = {},
  ) {
    const { maxStreams, heartbeatMs, tokenCheckMs, settle, log, metrics } = options;
    this.settle = settle ?? (() => Promise.resolve());
    this.maxStreams = maxStreams ?? EVENT_LIMITS.maxStreams;
    const counted = metrics && ((open: number) => metrics.eventStreams(open));
    this.slots = new SharedSlots(this.maxStreams, () => performance.now(), counted);
    this.heartbeatMs = heartbeatMs ?? EVENT_LIMITS.heartbeatMs;
    this.tokenCheckMs = tokenCheckMs ?? EVENT_LIMITS.tokenCheckMs;
    this.log = log ?? silentLog;
  }

  /** A page of up to `limit` events after `after` (the oldest kept when undefined), once every
   * event committed so far is readable. Throws `eventsGone` when events after `after` may be
   * pruned, or when it is past the newest event. */
  async page(after: bigint | undefined, limit: number): Promise<FeedPage> {
    await this.settle();
    return this.readPage(after, limit);
  }

  /** `page` up to what the log made readable so far: no settle. */
  private async readPage(after: bigint | undefined, limit: number): Promise<FeedPage> {
    const { events, horizon, head: known } = await this.events.read(after, limit);
    if (after !== undefined && after < horizon) throw eventsPruned(after, horizon);
    // Past the newest event, a cursor names events this log never had (another store's, or
    // from before a restore): served, its reader would skip every event up to it. The head
    // read after a settle is at least any position served, on any instance.
    if (after !== undefined && events.length === 0 && after > this.recent.head) {
      const head = known ?? (await this.events.head());
      if (after > head) throw eventsPastHead(after, head);
    }
    const start = after ?? horizon;
    return { start, events, next: events.at(-1)?.position ?? start };
  }

  /** The newest position, every event committed before the call readable (`after=now`). */
  async head(): Promise<bigint> {
    await this.settle();
    return this.events.head();
  }

  /** Up to `limit` events after `after`: from memory, else readPage (may throw `eventsGone`);
   * memory's were readable, so the log has them: a stream catching up pays no look a batch. */
  async after(after: bigint, limit: number): Promise<ChangeEvent[]> {
    await this.start();
    if (this.stale) await this.refresh();
    return this.recent.after(after, limit) ?? (await this.readPage(after, limit)).events;
  }

  /** A stream's cursor, at `position`: see FeedCursor. */
  follow = (position: bigint): FeedCursor => this.recent.follow(position);

  /** Resolves true once the feed knows of an event after `after`, false after `ms`, when
   * `signal` aborts, or when the feed closes. */
  async waitBeyond(after: bigint, ms: number, signal?: AbortSignal): Promise<boolean> {
    await this.start();
    if (this.recent.head > after) return true;
    if (this.closed || signal?.aborted) return false;
    return new Promise<boolean>((resolve) => {
      const done = (found: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', aborted);
        this.waiters.delete(waiter);
        resolve(found);
      };
      const waiter: Waiter = { after, wake: done };
      const aborted = () => done(false);
      const timer = setTimeout(() => done(false), ms);
      signal?.addEventListener('abort', aborted, { once: true });
      this.waiters.add(waiter);
      if (this.stale) void this.refresh();
    });
  }

  /** Counts a stream or long poll of `holder` (its token) as open until the function answered
   * is called; throws `tooManyEventStreams` when no slot may be had (see SharedSlots, which
   * calls `end` of one it takes away) or when the feed is closing. */
  admit(holder: number, end: () => void): () => void {
    if (this.closed) throw noEventStreamLeft(undefined);
    const release = this.slots.take(holder, end);
    if (release === undefined) throw noEventStreamLeft(this.maxStreams);
    return release;
  }

  /** Whether `after(position)` is answered from memory, with no read of the log (while
   * stale, the look it takes first may drop what memory holds of it). */
  inMemory = (position: bigint): boolean => !this.stale && this.recent.holds(position);

  get isClosed(): boolean {
    return this.closed;
  }

  /** Ends every wait at once (streams end, long polls answer); nothing waits from now on. */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.wakeTimer);
    this.unsubscribe?.();
    for (const waiter of [...this.waiters]) waiter.wake(false);
  }

  /** Learns where the log stands and starts listening, on first use. */
  private start(): Promise<void> {
    this.started ??= (async () => {
      await this.settle();
      this.recent.reset(await this.events.head());
      if (this.closed) return;
      // Nobody waiting: the next read of the feed looks, not every append (a feed used once
      // would otherwise read the log after every write for the rest of the process's life).
      this.unsubscribe = this.events.onAppended((handed) => this.heard(handed));
      this.timer = setInterval(() => {
        if (this.waiters.size > 0) void this.refresh();
      }, FEED_POLL_MS).unref();
    })().catch((error: unknown) => {
      this.started = undefined;
      throw error;
    });
    return this.started;
  }

  /**
   * An append heard of. The events handed by the store are taken as they are while streams or
   * long polls are open and they follow `head` with nothing between; otherwise the log is
   * read (now if anyone waits, else at the next wait: a feed used once must not read the log
   * after every write for the rest of the process's life).
   */
  private heard(handed: HandedEvents | undefined): void {
    // A look that has not read yet reads this commit too: not `again` (under steady writes,
    // looks would follow each other for good).
    if (handed !== undefined && this.lookPending) return;
    const takes =
      (this.slots.inUse > 0 || this.waiters.size > 0) && !this.stale && !this.refreshing;
    if (takes && handed !== undefined && this.take(handed())) return;
    if (this.waiters.size > 0) void this.refresh();
    else this.stale = true;
  }

  /**
   * Appends `events` if they follow `head` with nothing between (those at or below it are
   * known already) and wakes the waiters soon; answers false, taking none, if one does not:
   * another process committed in between, and only the log knows what.
   */
  private take(events: readonly ChangeEvent[]): boolean {
    const fresh = this.recent.following(events);
    if (fresh === undefined) return false;
    if (fresh.length === 0) return true;
    this.recent.append(fresh);
    this.wakeSoon();
    return true;
  }

  /** Wakes the waiters at the next timer, or LOOK_EVERY_MS after the last look or wake-up. */
  private wakeSoon(): void {
    if (this.wakeTimer !== undefined) return;
    const early = Math.max(0, this.lastLook + LOOK_EVERY_MS - performance.now());
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = undefined;
      this.lastLook = performance.now();
      this.wakeWaiters();
    }, early);
  }

  /** Wakes the waiters an event is known for, after dropping what every stream has read. */
  private wakeWaiters(): void {
    this.recent.forgetRead();
    const head = this.recent.head;
    for (const waiter of [...this.waiters]) if (head > waiter.after) waiter.wake(true);
  }

  /**
   * Reads what the log has after `head`, one look at a time (a wake-up during one: another),
   * at most one every LOOK_EVERY_MS.
   */
  private refresh(): Promise<void> {
    if (this.refreshing !== undefined) {
      this.again = true;
      return this.refreshing;
    }
    this.refreshing = this.readNewer()
      .catch((error: unknown) => {
        this.log.warn(
          { err: error },
          'reading the event log failed; streams wait for the next look',
        );
      })
      .finally(() => {
        this.refreshing = undefined;
        this.lookPending = false;
        if (this.again && !this.closed) {
          this.again = false;
          void this.refresh();
        }
      });
    return this.refreshing;
  }

  private async readNewer(): Promise<void> {
    this.lookPending = true;
    const early = this.lastLook + LOOK_EVERY_MS - performance.now();
    if (early > 0) await new Promise((resolve) => setTimeout(resolve, early));
    this.lastLook = performance.now();
    this.stale = false;
    await this.settle();
    this.lookPending = false;
    for (;;) {
      const head = this.recent.head;
      const { events, horizon } = await this.events.read(head, EVENT_LIMITS.pageMax);
      if (horizon > head) {
        // Pruned past what this process knew: what it holds is no longer all there is.
        this.recent.reset(horizon);
        continue;
      }
      if (events.length === 0) break;
      this.recent.append(events);
      if (events.length < EVENT_LIMITS.pageMax) break;
    }
    this.wakeWaiters();
  }
}
