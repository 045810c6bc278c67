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
}

/**
 * The log of plant events. Every plant write records its event in its own transaction (see
 * PlantStore); the log numbers them so that every reader sees the same order and a reader
 * that has seen position p never later finds a new event below p (see the migrations
 * *_plant_events.sql for how, on each database).
 */
export interface EventLog {
  /**
   * Up to `limit` events above `after`, oldest first; with `after` undefined, above the
   * horizon (the oldest kept).
   */
  read(after: bigint | undefined, limit: number): Promise<EventPage>;
  /** The highest position numbered so far, or the horizon if higher (0 for an empty log). */
  head(): Promise<bigint>;
  /**
   * Deletes up to `batch` of the oldest events written before `before`, the oldest first and
   * none above one it keeps, and moves the horizon up to the highest it deleted; answers how
   * many it deleted (fewer than `batch`: none older is left).
   */
  prune(before: Date, batch: number): Promise<number>;
  /**
   * Numbers the events that committed since the last run and makes them readable, where the
   * database needs that done after the commit (PostgreSQL: see 0011_plant_events.sql); at
   * most `batch` at a time. Answers how many it numbered. Absent where a write's event is
   * numbered as it commits (SQLite).
   */
  sequence?(batch: number): Promise<number>;
  /**
   * Calls `listener` when events may have been appended: by this process (after its commit,
   * or its sequencer's), or by another process on the database (PostgreSQL: NOTIFY; SQLite:
   * PRAGMA data_version, looked at every 50 ms while a listener is registered). Answers the
   * function that stops it. A hint only: readers read the log to know.
   */
  onAppended(listener: () => void): () => void;
  /**
   * Calls `listener` after each commit in this process that recorded an event and left it
   * for `sequence` (PostgreSQL); answers the function that stops it.
   */
  onUnsequenced?(listener: () => void): () => void;
}
