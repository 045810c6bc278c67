import type Database from 'better-sqlite3';
import { INT64_MAX } from '../../core/int64.js';
import { IdsExhaustedError } from '../store.js';

/**
 * Server-assigned ids on SQLite: a counter (the last id handed out or skipped) and the runs of
 * ids clients took above it (see the migrations 0004_server_ids and 0007_plant_id_runs). Every
 * operation reads or writes a few rows by their key: O(log n) whatever the number of ids
 * clients took. Writes are one at a time (one writer per database), so what these statements
 * read holds until the write that runs them commits.
 */
export interface PlantIds {
  /** The next id to try: the first above the counter that no client took. Moves the counter. */
  next(): bigint;
  /** Records an id a client gave its plant, so that the counter skips it. */
  taken(id: bigint): void;
}

interface Run {
  first: bigint;
  last: bigint;
}

export function sqlitePlantIds(db: Database.Database): PlantIds {
  const s = {
    counter: db.prepare('SELECT last FROM plant_id_counter').pluck(),
    setCounter: db.prepare('UPDATE plant_id_counter SET last = ?'),
    runStartingAt: db.prepare('SELECT last FROM plant_id_runs WHERE first = ?').pluck(),
    runAtOrBefore: db.prepare(
      'SELECT first, last FROM plant_id_runs WHERE first <= ? ORDER BY first DESC LIMIT 1',
    ),
    insertRun: db.prepare('INSERT INTO plant_id_runs (first, last) VALUES (?, ?)'),
    extendRun: db.prepare('UPDATE plant_id_runs SET last = ? WHERE first = ?'),
    deleteRun: db.prepare('DELETE FROM plant_id_runs WHERE first = ?'),
  };
  return {
    next() {
      const last = s.counter.get() as bigint;
      if (last === INT64_MAX) throw new IdsExhaustedError();
      let id = last + 1n;
      // Runs are never adjacent, so the id after a run's last is free, and the run now lies
      // at or below the counter: it is needed no more.
      const runLast = s.runStartingAt.get(id) as bigint | undefined;
      if (runLast !== undefined) {
        if (runLast === INT64_MAX) throw new IdsExhaustedError();
        s.deleteRun.run(id);
        id = runLast + 1n;
      }
      s.setCounter.run(id);
      return id;
    },
    taken(id: bigint) {
      if (id <= (s.counter.get() as bigint)) return;
      const before = s.runAtOrBefore.get(id) as Run | undefined;
      if (before !== undefined && before.last >= id) return;
      const afterLast =
        id === INT64_MAX ? undefined : (s.runStartingAt.get(id + 1n) as bigint | undefined);
      if (afterLast !== undefined) s.deleteRun.run(id + 1n);
      const last = afterLast ?? id;
      if (before !== undefined && before.last === id - 1n) s.extendRun.run(last, before.first);
      else s.insertRun.run(id, last);
    },
  };
}

/**
 * For a restore: makes the database `db` hand out no id that it, or the database it replaces
 * (attached as `replaced`, if given), has handed out, skipped or seen a client take. The
 * counter goes to `last` (the replaced database's counter) where it is lower, the runs of both
 * databases are merged into one set, and the invariants hold again: a run the counter now
 * reaches or touches moves the counter to its end, and runs below it go. `replaced` of a
 * schema from server-assigned ids on (0004): before 0007 it kept every taken id in
 * plant_ids_taken. Runs in a database are at most one per id a client took, so the merge is a
 * sort of those: run in a statement, never held in memory.
 */
export function carryPlantIds(db: Database.Database, last: bigint, replaced?: string): void {
  const has = (table: string) =>
    replaced !== undefined &&
    db
      .prepare(`SELECT 1 FROM ${replaced}.sqlite_master WHERE type = 'table' AND name = ?`)
      .get(table) !== undefined;
  const carried = [
    'SELECT first, last FROM main.plant_id_runs',
    ...(has('plant_id_runs') ? [`SELECT first, last FROM ${replaced}.plant_id_runs`] : []),
    ...(has('plant_ids_taken') ? [`SELECT id, id FROM ${replaced}.plant_ids_taken`] : []),
  ].join(' UNION ALL ');
  db.prepare('UPDATE plant_id_counter SET last = max(last, ?)').run(last);
  // Read again here: a server that ran on `replaced` since `last` was read moved it on.
  if (has('plant_id_counter')) {
    db.exec(
      // coalesce: SQLite's max() of a NULL is NULL, and the counter would be lost.
      `UPDATE plant_id_counter SET last = max(last, coalesce((SELECT last FROM ${replaced}.plant_id_counter), 0))`,
    );
  }
  // Islands of overlapping or touching runs: a run starts a new one when it begins past the
  // furthest end of the runs before it, plus one. `first - 1`: `reach + 1` overflows at the
  // largest id.
  db.exec(`CREATE TEMP TABLE merged_runs AS
    WITH runs(first, last) AS (${carried}),
    reaching AS (SELECT first, last, max(last) OVER
      (ORDER BY first ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM runs),
    islands AS (SELECT first, last, sum(reach IS NULL OR first - 1 > reach) OVER
      (ORDER BY first ROWS UNBOUNDED PRECEDING) AS island FROM reaching)
    SELECT min(first) AS first, max(last) AS last FROM islands GROUP BY island`);
  const counter = 'SELECT last FROM plant_id_counter';
  db.exec(`UPDATE plant_id_counter SET last = max(last,
    coalesce((SELECT max(last) FROM temp.merged_runs WHERE first - 1 <= (${counter})), 0))`);
  db.exec('DELETE FROM main.plant_id_runs');
  db.exec(`INSERT INTO main.plant_id_runs (first, last)
    SELECT first, last FROM temp.merged_runs WHERE first - 1 > (${counter}) ORDER BY first`);
  db.exec('DROP TABLE temp.merged_runs');
}
