import type { ChangeEvent } from '../core/change-events.js';

/**
 * Events the feed keeps in memory, the newest, for the streams that are up to date: at least
 * this many, at most twice as many (trimmed in one slice, not one at each append).
 */
export const RECENT_EVENTS = 1024;

/**
 * The newest events of the log, every one above `floor` up to `head` with nothing between,
 * oldest first: what the feed serves from memory.
 */
export class RecentEvents {
  private events: ChangeEvent[] = [];
  private low = 0n;
  private high = 0n;

  /** The last position held: every event of the log up to it is known. */
  get head(): bigint {
    return this.high;
  }

  /** Starts over at `position`, holding nothing: the log up to it is not held. */
  reset(position: bigint): void {
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

  /** Up to `limit` events after `after`; undefined when some of them are no longer held. */
  after(after: bigint, limit: number): ChangeEvent[] | undefined {
    if (after < this.low) return undefined;
    const events = this.events;
    let low = 0;
    let high = events.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (events[middle]!.position <= after) low = middle + 1;
      else high = middle;
    }
    return events.slice(low, low + limit);
  }
}
