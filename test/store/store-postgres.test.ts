import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import pg from 'pg';
import { silentLog } from '../../src/core/log.js';
import { loadMigrations } from '../../src/store/migrations.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { INT8_AS_BIGINT } from '../../src/store/postgres/int8.js';
import { connectionConfig, openPostgresStore } from '../../src/store/postgres/open.js';
import { poolQuery, type QueryOptions } from '../../src/store/postgres/query.js';
import { noMetrics } from '../../src/core/metrics.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { UNKNOWN_VERSION } from '../../src/store/rows.js';
import { freshDatabase, POSTGRES_SKIP, POSTGRES_URL } from '../helpers/postgres.js';

// What only PostgreSQL has: its migrations, instances migrating together, its connection
// settings. The store contract runs on SQLite and PostgreSQL alike (store-contract.test.ts).

if (POSTGRES_SKIP) {
  it('postgres migrations', { skip: POSTGRES_SKIP }, () => {});
} else {
  describe('postgres migrations', () => {
    it('instances starting together on an empty database migrate it once', async (t) => {
      const url = await freshDatabase(t);
      const stores = await Promise.all(
        Array.from({ length: 6 }, () => openPostgresStore({ url, poolSize: 2 })),
      );
      t.after(() => Promise.all(stores.map((store) => store.close())));
      const versions = loadMigrations('postgres').map((migration) => migration.version);
      const applied = stores.flatMap((store) => store.migration.applied);
      assert.deepEqual(applied, versions, 'exactly one instance applied each version');
      for (const store of stores) assert.equal(store.migration.version, versions.at(-1));
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      t.after(() => client.end());
      const { rows } = await client.query('SELECT version FROM schema_migrations ORDER BY 1');
      assert.deepEqual(
        rows.map((row: { version: number }) => row.version),
        versions,
      );
    });

    it('every connection starts in READ COMMITTED, and without the WAL flush for --durability process', async (t) => {
      const url = await freshDatabase(t);
      for (const [durability, flush] of [
        ['power', 'on'],
        ['process', 'off'],
      ] as const) {
        const client = new pg.Client(connectionConfig(url, durability));
        await client.connect();
        t.after(() => client.end());
        const show = async (name: string) =>
          (await client.query<Record<string, string>>(`SHOW ${name}`)).rows[0]![name];
        assert.equal(await show('default_transaction_isolation'), 'read committed');
        assert.equal(await show('synchronous_commit'), flush, durability);
        // The URL's own options (here the test's schema) are kept.
        assert.equal(
          await show('search_path'),
          new URL(url).searchParams.get('options')?.split('=')[1],
        );
      }
    });

    it('reads connection URLs as pg does, a socket directory in the query included', () => {
      const config = connectionConfig('postgres://app@/plants?host=/run/postgresql', 'power');
      assert.equal(config.host, '/run/postgresql');
      assert.equal(config.database, 'plants');
      assert.equal(config.user, 'app');
      assert.equal(config.options, '-c default_transaction_isolation=read\\ committed');
    });

    it('applies a version a database skipped, though a later one is applied', async (t) => {
      const url = await freshDatabase(t);
      await (await openPostgresStore({ url })).close();
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      t.after(() => client.end());
      // Version 3 made a table no later version changes; an earlier one would meet the
      // later ones' changes to its tables (as 0005's to idempotency_keys).
      await client.query('DROP TABLE rate_limits');
      await client.query('DELETE FROM schema_migrations WHERE version = 3');
      const store = await openPostgresStore({ url });
      t.after(() => store.close());
      assert.deepEqual(store.migration.applied, [3]);
      const count = { policy: 'token', subject: '1', windowStart: 0, windowEnd: 60, count: 2 };
      assert.deepEqual(await store.rateLimits?.add([count]), [count]);
    });

    it('0005 gives the plants of an older database versions, and kept answers theirs', async (t) => {
      const url = await freshDatabase(t);
      const older = loadMigrations('postgres').filter((migration) => migration.version < 5);
      await migratePostgres(url, older, silentLog);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      t.after(() => client.end());
      await client.query(`INSERT INTO plants (id, name, tag) VALUES (1, 'a', NULL), (2, 'b', 't');
        INSERT INTO idempotency_keys (token_id, key, fingerprint, created_at, expires_at,
            lease_until, status, plant_id, plant_name, plant_tag)
          VALUES (1, 'same', 'f', now(), now(), now(), 201, 2, 'b', 't'),
                 (1, 'changed', 'f', now(), now(), now(), 201, 1, 'was a', NULL)`);
      const store = await openPostgresStore({ url });
      t.after(() => store.close());
      assert.equal(store.migration.applied[0], 5, 'the versions migration first of those applied');
      const [a, b] = [await store.plants.get(1n), await store.plants.get(2n)];
      assert.ok(a !== undefined && b !== undefined);
      assert.notEqual(a.version, b.version);
      const at = new Date(0);
      const replay = (key: string) =>
        store.idempotency.claim({ tokenId: 1, key, fingerprint: 'f', at });
      assert.deepEqual(await replay('same'), {
        state: 'answered',
        answer: { status: 201, plant: { id: 2n, name: 'b', tag: 't', version: b.version } },
      });
      assert.deepEqual(await replay('changed'), {
        state: 'answered',
        answer: { status: 201, plant: { id: 1n, name: 'was a', version: UNKNOWN_VERSION } },
      });
    });

    it('a change made outside plantstore gives the plant a new version too', async (t) => {
      const url = await freshDatabase(t);
      const store = await openPostgresStore({ url });
      t.after(() => store.close());
      const before = await store.plants.insert({ id: 1n, name: 'Fern' });
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      t.after(() => client.end());
      await client.query(`UPDATE plants SET name = 'Ivy' WHERE id = 1;
        INSERT INTO plants (id, name) VALUES (2, 'x')`);
      const after = await store.plants.get(1n);
      assert.equal(after?.name, 'Ivy');
      assert.notEqual(after.version, before.version);
      assert.equal(typeof (await store.plants.get(2n))?.version, 'bigint');
    });

    it('refuses a database whose encoding is not UTF8', async (t) => {
      const admin = new pg.Client({ connectionString: POSTGRES_URL });
      await admin.connect();
      const name = `latin1_${randomBytes(4).toString('hex')}`;
      await admin.query(
        `CREATE DATABASE ${name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`,
      );
      t.after(async () => {
        await admin.query(`DROP DATABASE ${name}`);
        await admin.end();
      });
      const url = new URL(POSTGRES_URL!);
      url.pathname = `/${name}`;
      await assert.rejects(openPostgresStore({ url: url.toString() }), /needs UTF8/);
    });

    it('refuses a database migrated past what this plantstore knows', async (t) => {
      const url = await freshDatabase(t);
      const first = await openPostgresStore({ url });
      await first.close();
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query("INSERT INTO schema_migrations VALUES (999, 'future', now())");
      await client.end();
      await assert.rejects(openPostgresStore({ url }), /newer than this plantstore knows/);
    });

    it('int8 arrives as bigints, and as text only in the query that asks (one connection)', async (t) => {
      const url = await freshDatabase(t);
      const pool = new pg.Pool({ connectionString: url, max: 1, types: INT8_AS_BIGINT });
      t.after(() => pool.end());
      const query = poolQuery(pool);
      const extremes =
        "SELECT '-9223372036854775808'::int8 AS low, 9223372036854775807::int8 AS high";
      const read = async (name: string, options?: QueryOptions) =>
        (await query<{ low: unknown; high: unknown }>(name, extremes, [], options)).rows[0];
      assert.deepEqual(await read('asBigints'), { low: -(2n ** 63n), high: 2n ** 63n - 1n });
      assert.deepEqual(await read('asText', { int8AsText: true }), {
        low: '-9223372036854775808',
        high: '9223372036854775807',
      });
      // The same connection, the same prepared statements: the override stayed with its query.
      assert.deepEqual(await read('asBigints'), { low: -(2n ** 63n), high: 2n ** 63n - 1n });
      assert.equal(typeof (await read('asText', { int8AsText: true }))?.high, 'string');
    });

    it('a statement the server refuses gives its connection back; one left unsound is dropped', async (t) => {
      const url = await freshDatabase(t);
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      t.after(() => pool.end());
      pool.on('error', () => {});
      let connections = 0;
      pool.on('connect', () => (connections += 1));
      const query = poolQuery(pool);
      const backend = async () =>
        (await query<{ pid: number }>('pid', 'SELECT pg_backend_pid() AS pid', [])).rows[0]!.pid;
      const first = await backend();
      await query('table', 'CREATE TABLE k (id int PRIMARY KEY, v int)', [], {
        planEachTime: true,
      });
      await query('insert', 'INSERT INTO k VALUES ($1, 1)', [1]);
      // A key taken (what two requests racing one Idempotency-Key meet), and a statement that
      // fails as it runs, once prepared: both keep their connection and its statements.
      await assert.rejects(query('insert', 'INSERT INTO k VALUES ($1, 1)', [1]), { code: '23505' });
      await assert.rejects(query('divide', 'SELECT 1 / $1::int AS q', [0]), { code: '22012' });
      assert.deepEqual((await query('divide', 'SELECT 1 / $1::int AS q', [1])).rows, [{ q: 1 }]);
      await query('insert', 'INSERT INTO k VALUES ($1, 1)', [2]);
      assert.equal(await backend(), first);
      assert.equal(connections, 1);

      // A column changed under a prepared statement fails it on this connection for good
      // (0A000): the connection is dropped, and the statement runs on the next one.
      const read = () => query<{ v: unknown }>('read', 'SELECT v FROM k WHERE id = $1', [1]);
      assert.deepEqual((await read()).rows, [{ v: 1 }]);
      const other = new pg.Client({ connectionString: url });
      await other.connect();
      await other.query('ALTER TABLE k ALTER COLUMN v TYPE text');
      await other.end();
      await assert.rejects(read(), { code: '0A000' });
      assert.deepEqual((await read()).rows, [{ v: '1' }]);
      assert.equal(connections, 2);

      // A refusal inside a transaction left open (a text of several statements) leaves the
      // connection in that failed transaction: dropped, though the refusal is one it keeps.
      await assert.rejects(query('open', 'BEGIN; SELECT 1 / 0', [], { planEachTime: true }), {
        code: '22012',
      });
      assert.deepEqual((await read()).rows, [{ v: '1' }]);
      assert.equal(connections, 3);

      // A connection the server ends (FATAL) is dropped.
      const before = await backend();
      await assert.rejects(
        query('end', 'SELECT pg_terminate_backend(pg_backend_pid())', []),
        (error: unknown) => error instanceof StoreUnavailableError,
      );
      assert.notEqual(await backend(), before);
      assert.equal(connections, 4);
    });

    it('a statement unanswered past the read timeout is a 503, and its connection is given up', async (t) => {
      const url = await freshDatabase(t);
      const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 2_000 });
      t.after(() => pool.end());
      pool.on('error', () => {});
      const query = poolQuery(pool, noMetrics, 200);
      const started = performance.now();
      await assert.rejects(query('slow', 'SELECT pg_sleep(1)', []), (error: unknown) => {
        assert.ok(error instanceof StoreUnavailableError);
        assert.match(String((error.cause as Error).message), /Query read timeout/);
        return true;
      });
      assert.ok(performance.now() - started < 900, 'answered at the read timeout, not the sleep');
      // One connection in all: had the slow one kept it, this would wait for it, then fail.
      assert.deepEqual((await query('one', 'SELECT 1 AS one', [])).rows, [{ one: 1 }]);
      // A statement that throws as it is handed to pg fails at once, and gives its slot back.
      const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
      const original = proto.query;
      proto.query = () => {
        throw new Error('refused by the test');
      };
      try {
        await assert.rejects(query('thrown', 'SELECT 2', []), /refused by the test/);
      } finally {
        proto.query = original;
      }
      assert.deepEqual((await query('two', 'SELECT 2 AS two', [])).rows, [{ two: 2 }]);
    });
  });
}
