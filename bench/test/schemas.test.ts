import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { dropUndroppedSchemas, seedSchema } from '../data/postgres.js';
import { SqliteKeeper, seedSqlite } from '../data/seed.js';
import { openSqlite } from '../yardsticks/sqlite.js';
import { openStore, type StoreConfig } from '../../src/store/open.js';
import { POSTGRES_SKIP, POSTGRES_URL } from '../../test/helpers/postgres.js';
import { makeTempDir } from '../../test/helpers/temp-dir.js';

// A benchmark interrupted by a signal leaves no schema behind: bench/run.ts calls
// dropUndroppedSchemas then, since the phases' own cleanup does not run.

async function schemaExists(name: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [
      name,
    ]);
    return rowCount === 1;
  } finally {
    await client.end();
  }
}

const schemaOf = (url: string) => /search_path=([a-z0-9_]+)/.exec(decodeURIComponent(url))![1]!;

describe('the benchmark’s PostgreSQL schemas', { skip: POSTGRES_SKIP }, () => {
  it('drops the ones not dropped yet, and only those', async (t) => {
    const dir = makeTempDir(t);
    const dropped = await seedSchema(POSTGRES_URL!, 10, join(dir, 'a.tokens'));
    const left = await seedSchema(POSTGRES_URL!, 10, join(dir, 'b.tokens'));
    await dropped.drop();
    const lines: string[] = [];
    await dropUndroppedSchemas((line) => lines.push(line));
    assert.equal(await schemaExists(schemaOf(left.url)), false);
    assert.deepEqual(lines, [`dropped the PostgreSQL schema ${schemaOf(left.url)}`]);
    // The seeding client of the left schema is still open, as it is when a run is cut off.
    await left.keeper.client.end();
    await dropUndroppedSchemas((line) => lines.push(line));
    assert.equal(lines.length, 1, 'nothing left to drop');
  });
});

// The data sets of the rows "POST without an id after clients took ids above the counter":
// the client ids are recorded as plantstore records them, so its creates skip them; the
// keeper keeps them; the yardsticks assign ids above every one.

const SEEDED = 10;
const CLIENT_IDS = 5; // 12, 14, 16, 18, 20

async function createWithoutIds(config: StoreConfig, count: number): Promise<bigint[]> {
  const store = await openStore({ ...config, durability: 'process' });
  try {
    const ids: bigint[] = [];
    for (let i = 0; i < count; i++) ids.push((await store.plants.insert({ name: 'fern' })).id);
    return ids;
  } finally {
    await store.close();
  }
}

describe('the benchmark’s data with client ids above the counter', () => {
  it('on SQLite: plantstore skips them, the keeper keeps them, the yardstick goes above', async (t) => {
    const dir = makeTempDir(t);
    const file = join(dir, 'ids.db');
    await seedSqlite(file, SEEDED, join(dir, 'tokens'), CLIENT_IDS);
    const db = new Database(file, { readonly: true });
    t.after(() => db.close());
    assert.equal(db.prepare('SELECT last FROM plant_id_counter').pluck().get(), SEEDED);
    assert.deepEqual(
      db.prepare('SELECT first FROM plant_id_runs ORDER BY first').pluck().all(),
      [12, 14, 16, 18, 20],
    );
    assert.deepEqual(await createWithoutIds({ db: file }, 4), [11n, 13n, 15n, 17n]);
    const keeper = new SqliteKeeper(file, CLIENT_IDS);
    await keeper.trim(SEEDED);
    await keeper.close();
    const ids = db.prepare('SELECT id FROM plants WHERE id > ? ORDER BY id').pluck();
    assert.deepEqual(ids.all(SEEDED), [12, 14, 16, 18, 20]);
    const yardstick = openSqlite(file);
    assert.equal(yardstick.create('fern', null).id, 21n);
    yardstick.db.close();
  });

  it('on SQLite without client ids: the keeper deletes every plant above the seeded', async (t) => {
    const dir = makeTempDir(t);
    const file = join(dir, 'plain.db');
    await seedSqlite(file, SEEDED, join(dir, 'tokens'));
    assert.deepEqual(await createWithoutIds({ db: file }, 2), [11n, 12n]);
    const keeper = new SqliteKeeper(file);
    await keeper.trim(SEEDED);
    await keeper.close();
    const db = new Database(file, { readonly: true });
    t.after(() => db.close());
    assert.equal(db.prepare('SELECT max(id) FROM plants').pluck().get(), SEEDED);
  });

  it(
    'on PostgreSQL: the same, the bare yardstick’s sequence above them',
    { skip: POSTGRES_SKIP },
    async (t) => {
      const dir = makeTempDir(t);
      const schema = await seedSchema(POSTGRES_URL!, SEEDED, join(dir, 'a.tokens'), {
        clientIds: CLIENT_IDS,
      });
      const bare = await seedSchema(POSTGRES_URL!, SEEDED, join(dir, 'b.tokens'), {
        clientIds: CLIENT_IDS,
        sequenceAboveAll: true,
      });
      t.after(async () => {
        await schema.drop();
        await bare.drop();
      });
      const config = { db: '', databaseUrl: schema.url };
      assert.deepEqual(await createWithoutIds(config, 4), [11n, 13n, 15n, 17n]);
      await schema.keeper.trim(SEEDED);
      const { rows } = await schema.keeper.client.query<{ id: string }>(
        'SELECT id FROM plants WHERE id > $1 ORDER BY id',
        [SEEDED],
      );
      assert.deepEqual(
        rows.map((r) => r.id),
        ['12', '14', '16', '18', '20'],
      );
      const drawn = await bare.keeper.client.query<{ id: string }>(
        "SELECT nextval('plant_id_seq') AS id",
      );
      assert.equal(drawn.rows[0]!.id, '21');
    },
  );
});
