import assert from 'node:assert/strict';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { INT64_MAX } from '../../src/core/int64.js';
import { carryPlantIds } from '../../src/store/sqlite/plant-ids.js';

// A restore onto a store (carryPlantIds): the restored database hands out no id that it, or
// the database it replaces, handed out, skipped or saw a client take; and its runs keep the
// invariants server creates rely on (disjoint, never touching, wholly above the counter).

/** The ids a database will not hand out, as it records them: a counter and runs of ids. */
interface Ids {
  counter: bigint;
  runs: [bigint, bigint][];
  /** Before migration 0007: every taken id a row of plant_ids_taken instead of runs. */
  asRows?: boolean;
}

/** Runs of consecutive ids of `taken` (all above the counter), as the store keeps them. */
function runsOf(taken: bigint[]): [bigint, bigint][] {
  const runs: [bigint, bigint][] = [];
  for (const id of [...new Set(taken)].sort((a, b) => (a < b ? -1 : 1))) {
    const last = runs.at(-1);
    if (last !== undefined && last[1] === id - 1n) last[1] = id;
    else runs.push([id, id]);
  }
  return runs;
}

/** Writes `ids` into the tables of `schema` of `db`, as a store of that version keeps them. */
function write(db: Database.Database, schema: string, { counter, runs, asRows }: Ids): void {
  db.exec(`CREATE TABLE ${schema}.plant_id_counter (last INTEGER NOT NULL)`);
  db.prepare(`INSERT INTO ${schema}.plant_id_counter (last) VALUES (?)`).run(counter);
  if (asRows) {
    db.exec(`CREATE TABLE ${schema}.plant_ids_taken (id INTEGER PRIMARY KEY)`);
    const insert = db.prepare(`INSERT INTO ${schema}.plant_ids_taken (id) VALUES (?)`);
    for (const [first, last] of runs) for (let id = first; id <= last; id++) insert.run(id);
  } else {
    db.exec(
      `CREATE TABLE ${schema}.plant_id_runs (first INTEGER PRIMARY KEY, last INTEGER NOT NULL)`,
    );
    const insert = db.prepare(`INSERT INTO ${schema}.plant_id_runs (first, last) VALUES (?, ?)`);
    for (const [first, last] of runs) insert.run(first, last);
  }
}

/** Restores `restored` over `replaced`, in memory; the ids the result will not hand out. */
function carried(restored: Ids, replaced: Ids | undefined): Ids {
  const db = new Database(':memory:');
  db.defaultSafeIntegers(true);
  write(db, 'main', restored);
  if (replaced !== undefined) {
    db.exec("ATTACH DATABASE ':memory:' AS replaced");
    write(db, 'replaced', replaced);
  }
  db.transaction(() => carryPlantIds(db, replaced?.counter ?? 0n, replaced && 'replaced'))();
  const counter = db.prepare('SELECT last FROM plant_id_counter').pluck().get() as bigint;
  const runs = db.prepare('SELECT first, last FROM plant_id_runs ORDER BY first').raw().all() as [
    bigint,
    bigint,
  ][];
  db.close();
  return { counter, runs };
}

/** Whether a database keeping `ids` will not hand out `id`. */
const withheld = ({ counter, runs }: Ids, id: bigint) =>
  id <= counter || runs.some(([first, last]) => first <= id && id <= last);

/** A store's ids: a counter up to 30, ids clients took above it among the next 30. */
const ids = fc
  .record({
    counter: fc.bigInt({ min: 0n, max: 30n }),
    offsets: fc.array(fc.bigInt({ min: 1n, max: 30n }), { maxLength: 12 }),
    asRows: fc.boolean(),
  })
  .map(({ counter, offsets, asRows }) => ({
    counter,
    runs: runsOf(offsets.map((offset) => counter + offset)),
    asRows,
  }));

test('a restore withholds every id either store withheld, and no other', () => {
  fc.assert(
    fc.property(ids, fc.option(ids, { nil: undefined }), (restored, replaced) => {
      const after = carried({ ...restored, asRows: false }, replaced);
      for (let id = 1n; id <= 70n; id++) {
        const before = withheld(restored, id) || (replaced !== undefined && withheld(replaced, id));
        assert.equal(withheld(after, id), before, `id ${id}`);
      }
      // What server creates rely on (src/store/sqlite/plant-ids.ts): the run after the counter
      // starts past its next id, and runs never touch.
      let reach = after.counter + 1n;
      for (const [first, last] of after.runs) {
        assert.ok(first > reach, `run ${first}-${last} touches what is before it (${reach - 1n})`);
        assert.ok(last >= first);
        reach = last + 1n;
      }
    }),
    { numRuns: 500 },
  );
});

test('a restore carries runs up to the largest id', () => {
  const after = carried(
    { counter: 5n, runs: [[INT64_MAX - 1n, INT64_MAX]] },
    { counter: 2n, runs: [[INT64_MAX - 3n, INT64_MAX - 2n]] },
  );
  assert.deepEqual(after, { counter: 5n, runs: [[INT64_MAX - 3n, INT64_MAX]] });
});
