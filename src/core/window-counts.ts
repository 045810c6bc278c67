import { type RateLimitPolicy, secondsLeft, windowStart } from './rate-limit.js';

/** Counts of one key in its current window. */
interface Entry {
  /** Window start, Unix seconds. */
  start: number;
  /** Counted here and not yet sent to the shared store. */
  local: number;
  /** Sent to the shared store, answer not yet back. */
  flushing: number;
  /** The total of every process, as the shared store last answered (ours included). */
  shared: number;
  /** Held by `reserve` for outcomes not known yet; never sent to the shared store. */
  reserved: number;
}

/**
 * A slot of one key's quota held by `reserve` until the outcome is known: `confirm` counts
 * it, `release` gives it back. It belongs to the window it was taken in.
 */
export interface Reservation<K> {
  readonly key: K;
  /** Start of that window, Unix seconds. */
  readonly windowStart: number;
  /** Held in the count of the keys that found no room (see MAX_KEYS). */
  readonly overflow?: true;
}

/** Counts taken out by `drain`, on their way to the shared store. */
export interface PendingCount {
  readonly subject: string;
  readonly windowStart: number;
  readonly count: number;
}

/** A total the shared store answered: every process's counts for the subject's window. */
export interface SharedTotal {
  readonly subject: string;
  readonly windowStart: number;
  readonly count: number;
}

/**
 * Keys one policy tracks in a process before it forgets one: the oldest key that has
 * neither used up its quota nor holds a reservation. When none of the oldest may be
 * forgotten (a flood of new addresses, each using up a small quota), a new key is counted
 * in one count shared by every key that found no room, under the same quota, until the
 * window ends: the table never holds more, and a flood of new keys runs that shared count
 * out at once instead of growing the process (bench/HISTORY.md).
 */
export const MAX_KEYS = 100_000;

/** Keys looked at, oldest first, for one that may be forgotten (see evictOne). */
const EVICTION_SCAN = 16;

/**
 * Counts requests per key (a token id, a client address) in fixed windows, and decides.
 * Synchronous and allocation-free on the hot path: a map lookup and a few additions.
 *
 * When instances share counts, `drain` hands the counts made since the last call to a
 * sync loop, which adds them to the shared store and hands the totals back to `settle`
 * (or, if the store failed, calls `restore`, and they are sent again next time). A
 * decision uses the last shared total plus what this process counted since.
 *
 * For events whose outcome comes later (a failed authentication, known only once the token
 * lookup answers), `reserve` holds a slot before it, so that events in flight together
 * cannot all pass the check before any is counted. Reservations stay in this process: a
 * decision counts them, `drain` never sends them, and only `confirm` turns one into a count
 * (sent like any other). Sharing them would mean subtracting released ones from the shared
 * total, racing the other processes and leaving phantom counts behind when a process dies
 * holding some; kept local, a released reservation leaves no trace anywhere, and no count
 * can go negative. The price: other processes learn of a failure only once it is known.
 */
export class WindowCounts<K extends string | number> {
  private readonly entries = new Map<K, Entry>();
  private readonly inFlight = new Map<string, Entry>();
  /**
   * Where evictOne goes on from: a Map's iterator follows deletions and additions, so the
   * oldest keys are walked once, not from the table's start each time (after many
   * deletions, V8 walks their empty slots first: 1.7 ms a new key, bench/HISTORY.md).
   * Dropped by each drain and prune (every sync round): the keys it passed over, kept then,
   * may be forgettable since, and an iterator holds the table it started on in memory.
   */
  private cursor: ReturnType<Map<K, Entry>['entries']> | undefined;
  /** The count of the keys that found no room; never shared with other processes. */
  private readonly overflow: Entry = { start: 0, local: 0, flushing: 0, shared: 0, reserved: 0 };

  constructor(
    readonly policy: RateLimitPolicy,
    private readonly maxKeys = MAX_KEYS,
  ) {}

  /** Keys tracked (in any window). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Counts one request for `key` if the quota allows it and returns the requests left
   * after it; -1 when the quota is used up (the refused request is not counted).
   */
  take(key: K, nowMs: number): number {
    const entry = this.current(key, nowMs);
    const used = usedBy(entry);
    if (used >= this.policy.quota) return -1;
    entry.local += 1;
    return this.policy.quota - used - 1;
  }

  /** Counts one event for `key` whatever the quota, and returns what is left (at least 0). */
  add(key: K, nowMs: number): number {
    const entry = this.current(key, nowMs);
    entry.local += 1;
    return Math.max(0, this.policy.quota - usedBy(entry));
  }

  /**
   * Holds one slot of `key`'s quota for an event whose outcome is not known yet; undefined
   * when the quota (reservations included) is used up. Settle it with `confirm` or `release`.
   */
  reserve(key: K, nowMs: number): Reservation<K> | undefined {
    const entry = this.current(key, nowMs);
    if (usedBy(entry) >= this.policy.quota) return undefined;
    entry.reserved += 1;
    return entry === this.overflow
      ? { key, windowStart: entry.start, overflow: true }
      : { key, windowStart: entry.start };
  }

  /**
   * The reserved event happened: it counts (in the window it was reserved in; nothing if
   * that has ended). Returns what is left of the current window, reservations counting.
   */
  confirm(reservation: Reservation<K>, nowMs: number): number {
    const entry = this.held(reservation);
    if (entry !== undefined) {
      entry.reserved -= 1;
      entry.local += 1;
    }
    return this.remaining(reservation.key, nowMs);
  }

  /** The reserved event did not happen: its slot is free again (nothing if its window ended). */
  release(reservation: Reservation<K>): void {
    const entry = this.held(reservation);
    if (entry !== undefined) entry.reserved -= 1;
  }

  /** What is left for `key` in the current window, without counting anything. */
  remaining(key: K, nowMs: number): number {
    const entry =
      this.entries.get(key) ?? (this.entries.size >= this.maxKeys ? this.overflow : undefined);
    if (entry === undefined || entry.start !== windowStart(nowMs, this.policy.windowSeconds)) {
      return this.policy.quota;
    }
    return Math.max(0, this.policy.quota - usedBy(entry));
  }

  /** Seconds until the current window ends (the same for every key). */
  resetSeconds(nowMs: number): number {
    return secondsLeft(nowMs, this.policy.windowSeconds);
  }

  /**
   * Takes out the counts made since the last drain, for the shared store, and forgets
   * keys whose window has ended. Call `settle` or `restore` before the next drain.
   */
  drain(nowMs: number): PendingCount[] {
    const start = windowStart(nowMs, this.policy.windowSeconds);
    const pending: PendingCount[] = [];
    this.inFlight.clear();
    this.cursor = undefined;
    for (const [key, entry] of this.entries) {
      if (entry.start !== start) {
        this.entries.delete(key);
      } else if (entry.local > 0) {
        const subject = String(key);
        pending.push({ subject, windowStart: entry.start, count: entry.local });
        entry.flushing = entry.local;
        entry.local = 0;
        this.inFlight.set(subject, entry);
      }
    }
    return pending;
  }

  /** The shared store took the drained counts and answered these totals. */
  settle(totals: readonly SharedTotal[]): void {
    for (const total of totals) {
      const entry = this.inFlight.get(total.subject);
      if (entry === undefined || entry.start !== total.windowStart) continue;
      entry.shared = total.count;
      entry.flushing = 0;
      this.inFlight.delete(total.subject);
    }
    this.restore();
  }

  /** The shared store did not take the drained counts: keep them for the next drain. */
  restore(): void {
    for (const entry of this.inFlight.values()) {
      entry.local += entry.flushing;
      entry.flushing = 0;
    }
    this.inFlight.clear();
  }

  /** Forgets keys whose window has ended (what `drain` does when counts are not shared). */
  prune(nowMs: number): void {
    this.cursor = undefined;
    const start = windowStart(nowMs, this.policy.windowSeconds);
    for (const [key, entry] of this.entries) {
      if (entry.start !== start && entry.flushing === 0) this.entries.delete(key);
    }
  }

  /**
   * Makes room by forgetting the oldest key, unless it has used up its quota in this window:
   * that is the key the limit is for, and forgetting it would let a client that floods the
   * map with new keys (addresses) clear its own count. Nor one holding reservations: they
   * would be lost, and their `release` would free slots of the key's next entry. Such a key
   * is passed over; false when the EVICTION_SCAN keys looked at were all such keys.
   */
  private evictOne(start: number): boolean {
    for (let scanned = 0; scanned < EVICTION_SCAN; scanned++) {
      let next = this.cursor?.next();
      if (next === undefined || next.done === true) {
        this.cursor = this.entries.entries();
        next = this.cursor.next();
        if (next.done === true) return false;
      }
      const [oldest, entry] = next.value;
      const kept =
        entry.start === start && (entry.reserved > 0 || usedBy(entry) >= this.policy.quota);
      if (!kept) {
        this.entries.delete(oldest);
        return true;
      }
    }
    return false;
  }

  /** The entry a reservation is held in, if its window is still the entry's. */
  private held(reservation: Reservation<K>): Entry | undefined {
    const entry = reservation.overflow === true ? this.overflow : this.entries.get(reservation.key);
    return entry !== undefined && entry.start === reservation.windowStart && entry.reserved > 0
      ? entry
      : undefined;
  }

  private current(key: K, nowMs: number): Entry {
    const start = windowStart(nowMs, this.policy.windowSeconds);
    let entry = this.entries.get(key);
    if (entry === undefined) {
      if (this.entries.size < this.maxKeys || this.evictOne(start)) {
        const created = { start, local: 0, flushing: 0, shared: 0, reserved: 0 };
        this.entries.set(key, created);
        return created;
      }
      entry = this.overflow;
    }
    if (entry.start !== start) {
      // A new window: whatever was counted, or is on its way, belongs to the last one.
      entry.start = start;
      entry.local = 0;
      entry.flushing = 0;
      entry.shared = 0;
      entry.reserved = 0;
    }
    return entry;
  }
}

/** What counts against the quota: every process's counts, ours on their way, our reservations. */
const usedBy = (entry: Entry): number =>
  entry.shared + entry.flushing + entry.local + entry.reserved;
