import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import pg from 'pg';
import { STILL_WRITING } from '../../src/store/postgres/plant-events.js';
import type { Store } from '../../src/store/store.js';
import { POSTGRES } from '../helpers/backends.js';

// PostgreSQL's watermark (src/store/postgres/plant-events.ts, the argument in the migration
// 0011_changes_feed.sql): a look waits for the writes holding the lock on audit_log that may
// hold a seq it passes, and for those only. The first test holds a write of the trail open by
// hand, past a write that commits after it, and reads right after a settle: a watermark that
// passed the open write would read the later event without it. (Another test's look on this
// database may match `running` too: the test then proves less, and still never fails wrongly.)

interface Opened {
  store: Store;
  /** A connection of the test's own, on the store's schema. */
  client(): Promise<pg.Client>;
  /**
   * Resolves once some backend runs (or has just run) one of `sqls`, polling every 5 ms, or
   * as soon as `read` does (then: 'read').
   */
  running(sqls: string[], read: Promise<unknown>): Promise<string>;
}

async function opened(t: TestContext): Promise<Opened> {
  const db = await POSTGRES.fresh(t);
  if (db.dialect !== 'postgres') throw new Error('PostgreSQL only');
  const store = await db.open({ poolSize: 4 });
  const client = async () => {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    t.after(() => c.end());
    return c;
  };
  const watcher = await client();
  return {
    store,
    client,
    async running(sqls, read) {
      let done = false;
      const first = read.then(() => 'read');
      void first.finally(() => (done = true));
      while (!done) {
        const { rows } = await watcher.query<{ query: string }>(
          'SELECT query FROM pg_stat_activity WHERE query = ANY($1::text[])',
          [sqls],
        );
        if (rows[0] !== undefined) return rows[0].query;
        await Promise.race([first, new Promise((resolve) => setTimeout(resolve, 5))]);
      }
      return first;
    },
  };
}

/** Opens a transaction that has drawn a seq of the trail and not committed; answers the seq. */
async function openWrite(client: pg.Client): Promise<bigint> {
  await client.query('BEGIN');
  const { rows } = await client.query<{ seq: string }>(
    `INSERT INTO audit_log (at, action, plant_id, after_name)
     VALUES (now(), 'create', 424242, 'held open') RETURNING seq`,
  );
  return BigInt(rows[0]!.seq);
}

/** The positions a read right after the next settle finds. */
async function readAfterSettle(store: Store): Promise<bigint[]> {
  await store.events.settle!();
  return (await store.events.read(undefined, 100)).events.map((event) => event.position);
}

describe(`${POSTGRES.name}: the watermark of the changes feed`, { skip: POSTGRES.skip }, () => {
  it('waits for a write still committing', async (t) => {
    const db = await opened(t);
    const held = await db.client();
    const first = await openWrite(held);
    const later = (await db.store.plants.insert({ name: 'committed first' })).id;
    const read = readAfterSettle(db.store);
    // The look found the open write and waits for it to end: only then does it commit.
    const how = await db.running([STILL_WRITING], read);
    assert.equal(how, STILL_WRITING, 'the settle waited for the write held open');
    await held.query('COMMIT');
    const positions = await read;
    assert.equal(positions.length, 2, 'both events, the one committed last included');
    assert.equal(positions[0], first);
    assert.ok(positions[1]! > first);
    t.diagnostic(`plant ${later}: read after the write held open, in order`);
  });

  it("reads an event's time as the audit trail reads it, to the millisecond", async (t) => {
    const db = await opened(t);
    const c = await db.client();
    // plantstore writes whole milliseconds; these by hand are finer, one before 1970. The feed
    // reads the time as epoch milliseconds, the trail as a timestamp pg parses: both cut.
    const written = [
      '2026-11-29 22:30:46.1236+00',
      '2026-11-29 22:30:46.9996+00',
      '1960-01-01 00:00:00.1236+00',
      '2026-11-29 22:30:46.5+00',
    ];
    for (const at of written) {
      await c.query(
        `INSERT INTO audit_log (at, action, plant_id, after_name) VALUES ($1, 'create', 7, 'x')`,
        [at],
      );
    }
    await db.store.events.settle!();
    const events = (await db.store.events.read(undefined, 10)).events;
    const trail = await db.store.audit.list({ limit: 10 });
    const iso = (dates: Date[]) => dates.map((at) => at.toISOString());
    assert.deepEqual(iso(events.map((e) => e.at)), [
      '2026-11-29T22:30:46.123Z',
      '2026-11-29T22:30:46.999Z',
      '1960-01-01T00:00:00.123Z',
      '2026-11-29T22:30:46.500Z',
    ]);
    assert.deepEqual(iso(events.map((e) => e.at)), iso(trail.map((e) => e.at)));
  });

  it('waits for none but the writes: a session idle in transaction holds back nothing', async (t) => {
    const db = await opened(t);
    // A session idle in transaction, as a pg_dump or a forgotten psql: no write of the trail.
    const idle = await db.client();
    await idle.query('BEGIN');
    await idle.query('SELECT 1');
    const plant = await db.store.plants.insert({ name: 'beside the idle session' });
    // A look that waited for the idle session would wait as long as it stays open.
    const timeout = new Promise<never>((_, reject) => {
      const timer = setTimeout(
        () => reject(new Error('the settle waited for the idle session')),
        10_000,
      );
      t.after(() => clearTimeout(timer));
    });
    const positions = await Promise.race([readAfterSettle(db.store), timeout]);
    assert.equal(positions.length, 1, `the event of plant ${plant.id} is read`);
    await idle.query('ROLLBACK');
  });
});
