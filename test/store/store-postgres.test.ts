import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import pg from 'pg';
import { loadMigrations } from '../../src/store/migrations.js';
import { connectionConfig, openPostgresStore } from '../../src/store/postgres/open.js';
import { freshDatabase, POSTGRES_SKIP, POSTGRES_URL } from '../helpers/postgres.js';
import { storeContract } from './store-contract.js';

if (POSTGRES_SKIP) {
  it('postgres store contract', { skip: POSTGRES_SKIP }, () => {});
} else {
  storeContract('postgres store contract', async (t) => {
    const store = await openPostgresStore({ url: await freshDatabase(t) });
    t.after(() => store.close());
    return store;
  });

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
      await client.query('DROP TABLE audit_log; DROP TABLE idempotency_keys');
      await client.query('DELETE FROM schema_migrations WHERE version = 2');
      const store = await openPostgresStore({ url });
      t.after(() => store.close());
      assert.deepEqual(store.migration.applied, [2]);
      await store.plants.insert({ id: 1n, name: 'audited' });
      assert.equal((await store.audit.list({ limit: 10 })).length, 1);
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
  });
}
