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
 * neither used up its quota nor holds a reservation.
 */
export const MAX_KEYS = 100_000;

/** Oldest keys looked at for one that may be forgotten (see evictOne). */
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
    return { key, windowStart: entry.start };
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
    const entry = this.entries.get(key);
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
   * moves to the back; after a few of them the map grows by one instead (only exhausted keys,
   * each a quota's worth of requests, and keys with events in flight can make it grow).
   */
  private evictOne(start: number): void {
    for (let scanned = 0; scanned < EVICTION_SCAN; scanned++) {
      const [oldest, entry] = this.entries.entries().next().value!;
      this.entries.delete(oldest);
      const kept =
        entry.start === start && (entry.reserved > 0 || usedBy(entry) >= this.policy.quota);
      if (!kept) return;
      this.entries.set(oldest, entry);
    }
  }

  /** The entry a reservation is held in, if its window is still the entry's. */
  private held(reservation: Reservation<K>): Entry | undefined {
    const entry = this.entries.get(reservation.key);
    return entry !== undefined && entry.start === reservation.windowStart && entry.reserved > 0
      ? entry
      : undefined;
  }

  private current(key: K, nowMs: number): Entry {
    const start = windowStart(nowMs, this.policy.windowSeconds);
    const entry = this.entries.get(key);
    if (entry === undefined) {
      if (this.entries.size >= this.maxKeys) this.evictOne(start);
      const created = { start, local: 0, flushing: 0, shared: 0, reserved: 0 };
      this.entries.set(key, created);
      return created;
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
