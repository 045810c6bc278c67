// The changes feed's side of the store: the log of plant events that GET /events reads (see
// store.ts for the rest; it re-exports these).

import type { ChangeEvent } from '../core/change-events.js';

/** A page of the log, read in one snapshot with the horizon it was read against. */
export interface EventPage {
  /** Events above the cursor, oldest first. */
  events: ChangeEvent[];
  /**
   * The highest position pruned so far (0: none): every event at or below it may be gone. A
   * cursor below it has missed events; see docs/events.md.
   */
  horizon: bigint;
  /**
   * The newest position readable when the page was read, where the store knows it without a
   * read of its own (PostgreSQL: the watermark); else undefined, and `head()` tells.
   */
  head?: bigint;
}

/**
 * The log of plant events: the audit trail, read as the changes feed (every plant write
 * records its audit entry in its own transaction, see PlantStore). Positions are the
 * entries' `seq`, read so that every reader sees the same order and a reader that has seen
 * position p never later finds a new event below p (see the migrations *_changes_feed.sql
 * for how, on each database).
 */
export interface EventLog {
  /**
   * Up to `limit` events above `after`, oldest first; with `after` undefined, above the
   * horizon (the oldest kept). PostgreSQL: up to the watermark as `settle` left it.
   */
  read(after: bigint | undefined, limit: number): Promise<EventPage>;
  /** The highest position readable now, or the horizon if higher (0 for an empty log). */
  head(): Promise<bigint>;
  /**
   * Moves the horizon over up to `batch` of the oldest events written before `before`, the
   * oldest first and none above one it keeps (a prefix; the audit entries stay, for the audit
   * trail's own retention); answers how many it passed (fewer than `batch`: none older is left).
   */
  prune(before: Date, batch: number): Promise<number>;
  /**
   * Resolves once every event committed before the call is readable, where that takes a
   * look at the database (PostgreSQL: the watermark, see 0011_changes_feed.sql); calls during
   * a look share the next one. Absent where a write's event is readable once it commits
   * (SQLite).
   */
  settle?(): Promise<void>;
  /**
   * Calls `listener` when events may have been appended: by this process (after its commit),
   * or by another process on the database (PostgreSQL: NOTIFY, sent by the writing process
   * after its commits, at most every 20 ms; SQLite: PRAGMA data_version, looked at every 50 ms
   * while a listener is registered). Answers the function that stops it. A hint only: readers
   * read the log (after `settle`) to know.
   *
   * Where the store knows the events of this process's commit without reading them back
   * (SQLite, whose positions are final at commit), `handed` gives them, in position order;
   * built only when called. They are the log's own entries, but another process may have
   * committed between two of this process's commits: a reader may take them only where they
   * follow, with nothing between, the last position it holds.
   */
  onAppended(listener: (handed?: HandedEvents) => void): () => void;
}

/** The events of one commit of this process, built when called (see EventLog.onAppended). */
export type HandedEvents = () => readonly ChangeEvent[];
