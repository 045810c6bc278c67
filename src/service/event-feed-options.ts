import type { ChangeEvent } from '../core/change-events.js';
import type { Log } from '../core/log.js';
import type { CaughtUp } from '../store/store.js';

// How an EventFeed is set up, and the page it answers (src/service/event-feed.ts).

export interface EventFeedOptions {
  /** Streams and long polls open at once, at most; more are refused (503). */
  maxStreams?: number;
  /** A heartbeat on an idle stream, a check of a stream's token, this often (tests shorten). */
  heartbeatMs?: number;
  /** How often the feed looks while anyone waits and nothing woke it: FEED_POLL_MS (tests lengthen). */
  pollMs?: number;
  tokenCheckMs?: number;
  /** Makes every event committed so far readable before a page is read (EventLog.settle): a
   * write answered before a page is asked for is on it. */
  settle?: () => Promise<void>;
  /** EventLog.catchUp: what the feed's own looks take instead of a settle, where given. */
  catchUp?: () => Promise<CaughtUp>;
  log?: Log;
}

/** A page of the feed and where the next one starts. */
export interface FeedPage {
  /** The cursor the page was read after: `after`, or the horizon when none was given. */
  start: bigint;
  events: ChangeEvent[];
  /** The cursor of the next page: the last position of this one, or where it started. */
  next: bigint;
}
