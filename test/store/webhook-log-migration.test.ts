import assert from 'node:assert/strict';
import { join } from 'node:path';
import { it, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { silentLog } from '../../src/core/log.js';
import { loadMigrations } from '../../src/store/migrations.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { migrateSqlite } from '../../src/store/sqlite/migrate.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import type { Store } from '../../src/store/store.js';
import { SQLITE } from '../helpers/backends.js';
import { fanOutAll } from '../helpers/fan-out.js';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { makeTempDir } from '../helpers/setup.js';

// The upgrade to webhook messages from the log (*_webhook_log_positions.sql) on a store that
// the older fan-out had not caught up with: the events it left become their messages, each
// endpoint starts at the log's head with its pending messages counted, and the next write
// reaches the endpoints through the log.

/** Before the upgrade: three endpoints, one message pending, and two events left. */
const BEFORE = (now: string) => `
  INSERT INTO webhook_endpoints (url, events, created_at, updated_at, secret, enabled)
    VALUES ('https://a.example/', 'plant.created', ${now}, ${now}, 'whsec_a', true),
           ('https://b.example/', 'plant.created plant.deleted', ${now}, ${now}, 'whsec_b', true),
           ('https://c.example/', 'plant.created', ${now}, ${now}, 'whsec_c', false);
  INSERT INTO webhook_messages (endpoint_id, webhook_id, event_type, payload, created_at,
      next_attempt_at)
    VALUES (2, 'msg_old', 'plant.created', '{"id":1,"name":"old"}', ${now}, ${now});
  INSERT INTO audit_log (at, action, plant_id, after_name)
    VALUES (${now}, 'create', 2, 'Fern'), (${now}, 'create', 3, 'Moss');
  INSERT INTO webhook_events (event_type, payload, created_at, endpoint_max, fanned_to)
    VALUES ('plant.created', '{"id":2,"name":"Fern"}', ${now}, 3, 1),
           ('plant.created', '{"id":3,"name":"Moss"}', ${now}, 2, 0)`;

async function upgraded(store: Store, rows: <R>(sql: string) => Promise<R[]>) {
  const messages = async () =>
    (
      await rows<{ endpoint_id: number | bigint; payload: string }>(
        'SELECT endpoint_id, payload FROM webhook_messages ORDER BY id',
      )
    ).map((row) => `${row.endpoint_id} ${JSON.parse(row.payload).name}`);
  // Fern's event had reached endpoint 1; endpoint 3 is disabled. Moss's goes to 1 and 2.
  assert.deepEqual(await messages(), ['2 old', '2 Fern', '1 Moss', '2 Moss']);
  const endpoints = await rows<{ pending: number | bigint; log_position: number | bigint }>(
    'SELECT pending, log_position FROM webhook_endpoints ORDER BY id',
  );
  assert.deepEqual(
    endpoints.map((row) => [Number(row.pending), Number(row.log_position)]),
    [
      [1, 2],
      [3, 2],
      [0, 2],
    ],
    'pending counted, every endpoint at the head',
  );
  assert.equal(await fanOutAll(store), 0, 'the events before the upgrade are not sent again');
  await store.plants.insert({ name: 'Aloe' });
  assert.equal(await fanOutAll(store), 2);
  assert.deepEqual((await messages()).slice(4), ['1 Aloe', '2 Aloe']);
}

it(
  'SQLite: the upgrade writes the messages of the events left, and starts at the head',
  { skip: SQLITE.skip },
  async (t: TestContext) => {
    const file = join(makeTempDir(t), 'before-log-positions.db');
    const db = new Database(file);
    migrateSqlite(
      db,
      loadMigrations('sqlite').filter((migration) => migration.version < 12),
    );
    db.exec(BEFORE('0'));
    db.close();
    const store = openSqliteStore({ file });
    t.after(() => store.close());
    assert.equal(store.migration.applied[0], 12);
    const raw = new Database(file, { readonly: true });
    t.after(() => raw.close());
    await upgraded(store, async (sql) => raw.prepare(sql).all() as never);
  },
);

it(
  'PostgreSQL: the upgrade writes the messages of the events left, and starts at the head',
  { skip: POSTGRES_SKIP },
  async (t: TestContext) => {
    const url = await freshDatabase(t);
    const older = loadMigrations('postgres').filter((migration) => migration.version < 14);
    await migratePostgres(url, older, silentLog);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    t.after(() => client.end());
    await client.query(BEFORE('now()'));
    const store = await openPostgresStore({ url });
    t.after(() => store.close());
    assert.equal(store.migration.applied[0], 14);
    await upgraded(store, async (sql) => (await client.query(sql)).rows as never);
  },
);
