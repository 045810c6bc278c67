import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { POSTGRES, type TestDatabase } from '../helpers/backends.js';
import { fanOutAll } from '../helpers/fan-out.js';
import { freshDatabase } from '../helpers/postgres.js';

// The schemas the backend loop uses again (test/helpers/migrated-schemas.ts): one a test
// wrote to holds, for the next test, what the migrations leave in a new schema, rows and
// sequences alike, and nothing of the test before.

/** Every row of every table (schema_migrations without the times), and every sequence. */
async function contents(url: string): Promise<Record<string, unknown>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string; kind: string }>(
      `SELECT relname AS name, relkind AS kind FROM pg_class
       WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p', 'S')
       ORDER BY relname`,
    );
    const out: Record<string, unknown> = {};
    for (const { name, kind } of rows) {
      const sql =
        kind === 'S'
          ? `SELECT last_value, is_called FROM ${name}`
          : name === 'schema_migrations'
            ? 'SELECT version, name FROM schema_migrations ORDER BY version'
            : `SELECT * FROM ${name} ORDER BY 1`;
      out[name] = (await client.query(sql)).rows;
    }
    return out;
  } finally {
    await client.end();
  }
}

async function write(db: TestDatabase): Promise<void> {
  const store = await db.open();
  await store.webhooks.create({
    url: 'https://example.com/hook',
    events: ['plant.created'],
    secret: 'whsec_x',
    at: new Date(),
  });
  for (const name of ['a', 'b', 'c']) await store.plants.insert({ name });
  await store.plants.insert({ id: 9_000_000n, name: 'ahead' });
  await fanOutAll(store);
  await store.tokens.create({
    name: 'x',
    hash: 'a'.repeat(64),
    scopes: ['plants:read'],
    createdAt: new Date(),
    expiresAt: null,
  });
}

describe('a schema used again', { skip: POSTGRES.skip }, () => {
  let written = '';
  it('is written to by one test', async (t) => {
    const db = await POSTGRES.fresh(t);
    await write(db);
    assert.equal(db.dialect, 'postgres');
    written = JSON.stringify(await contents(db.dialect === 'postgres' ? db.url : ''));
  });

  it('holds for the next what the migrations leave in a new schema', async (t) => {
    const db = await POSTGRES.fresh(t);
    await (await db.open()).close();
    const url = db.dialect === 'postgres' ? db.url : '';
    const fresh = await freshDatabase(t);
    await (await openPostgresStore({ url: fresh })).close();
    const expected = await contents(fresh);
    assert.deepEqual(await contents(url), expected);
    assert.notEqual(written, JSON.stringify(expected), 'the first test did write');
    // And it works as a new one: the first id a server assigns, the first token's id.
    const store = await db.open();
    const again = await openPostgresStore({ url: fresh });
    t.after(() => again.close());
    assert.equal(
      (await store.plants.insert({ name: 'x' })).id,
      (await again.plants.insert({ name: 'x' })).id,
    );
  });
});
