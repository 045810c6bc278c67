import type { ChangeEvent } from '../core/change-events.js';

/**
 * Events the feed keeps in memory for streams that have yet to read them, at most: past twice
 * as many, the oldest are dropped down to this many in one slice (not one at each append), and
 * a stream that far behind reads the log.
 */
export const RECENT_EVENTS = 1024;

/**
 * Where a stream has read to (`position`, which the stream moves on as it sends). `close`
 * once the stream ends.
 */
export interface FeedCursor {
  position: bigint;
  close(): void;
}

/**
 * The newest events of the log, every one above `low` up to `head` with nothing between,
 * oldest first: what the feed serves from memory. Only what some open stream has yet to read
 * is kept (`forgetRead`, at each of the feed's wake-ups, at most every 15 ms: one pass over
 * the streams, not one at each append), so that events live a wake-up or two and most die
 * young. A fixed 1,024 kept lived long enough for the collector to move each one into its
 * old generation: with one stream following, a mark-compact every 1.5 s where there was one
 * in 10 s, and twice the collector's time a create (bench/HISTORY.md).
 */
export class RecentEvents {
  private events: ChangeEvent[] = [];
  private low = 0n;
  private high = 0n;
  private ready = false;
  private readonly cursors = new Set<FeedCursor>();

  /** A stream's cursor, at `position`: events above it are kept until it moves on. */
  follow(position: bigint): FeedCursor {
    const cursors = this.cursors;
    const cursor: FeedCursor = {
      position,
      close() {
        cursors.delete(cursor);
      },
    };
    cursors.add(cursor);
    return cursor;
  }

  /**
   * Drops the events every open stream has read (all of them, with no stream open), streams
   * behind what is held aside.
   */
  forgetRead(): void {
    let read = this.high;
    // A stream below what is held reads the log until it is up to date: it pins nothing.
    for (const { position } of this.cursors) {
      if (position >= this.low && position < read) read = position;
    }
    this.forget(read);
  }

  /** The last position held: every event of the log up to it is known. */
  get head(): bigint {
    return this.high;
  }

  /** Starts over at `position`, holding nothing: the log up to it is not held. */
  reset(position: bigint): void {
    this.ready = true;
    this.events = [];
    this.low = this.high = position;
  }

  /** Events above `head`, in position order, with nothing between. */
  append(events: readonly ChangeEvent[]): void {
    for (const event of events) this.events.push(event);
    this.high = events.at(-1)?.position ?? this.high;
    if (this.events.length >= 2 * RECENT_EVENTS) {
      const excess = this.events.length - RECENT_EVENTS;
      this.low = this.events[excess - 1]!.position;
      this.events = this.events.slice(excess);
    }
  }

  /**
   * Of `events` (one commit's, in position order), those above `head` if they follow it with
   * nothing between; undefined if one does not (another process committed in between).
   */
  following(events: readonly ChangeEvent[]): ChangeEvent[] | undefined {
    const fresh = events.filter((event) => event.position > this.high);
    let expected = this.high + 1n;
    for (const event of fresh) {
      if (event.position !== expected) return undefined;
      expected += 1n;
    }
    return fresh;
  }

  /** Drops the events up to `position`: no reader needs them from memory. */
  forget(position: bigint): void {
    if (position <= this.low) return;
    const kept = this.firstAbove(position);
    if (kept === 0) return;
    this.low = position < this.high ? position : this.high;
    this.events = this.events.slice(kept);
  }

  /** Whether `after` answers for `position` (nothing is held before the first `reset`). */
  holds(position: bigint): boolean {
    return this.ready && position >= this.low;
  }

  /** Up to `limit` events after `after`; undefined when some of them are no longer held. */
  after(after: bigint, limit: number): ChangeEvent[] | undefined {
    if (after < this.low) return undefined;
    const first = this.firstAbove(after);
    return this.events.slice(first, first + limit);
  }

  /** The index of the first event held above `position`. */
  private firstAbove(position: bigint): number {
    const events = this.events;
    let low = 0;
    let high = events.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (events[middle]!.position <= position) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}
