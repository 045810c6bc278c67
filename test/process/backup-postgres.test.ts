import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { silentLog } from '../../src/core/log.js';
import { loadMigrations } from '../../src/store/migrations.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { backupPostgres, restorePostgres } from '../../src/store/postgres/backup.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { adminRun, freshOwnDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { feedCalls } from '../helpers/feed-calls.js';
import { cleanEnv, ROOT, runCli, type Server, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// plantstore backup and restore on PostgreSQL (pg_dump, pg_restore and psql underneath), as
// real processes beside a real server, on a database of the test's own: a restore refuses
// while any plantstore server is connected to the database, so other tests' servers on the
// shared one would refuse it.

test(
  'PostgreSQL: backup while serving, restore with the servers stopped, the feed moved on',
  { skip: POSTGRES_SKIP },
  async (t) => {
    const url = await freshOwnDatabase(t);
    const dir = makeTempDir(t);
    const made = await runCli([
      'token',
      'create',
      '--database-url',
      url,
      '--scopes',
      'plants:read,plants:write,events:read',
    ]);
    assert.equal(made.code, 0, made.stderr);
    const bearer = made.stdout.trim();
    const { call, create, positions, gone } = feedCalls(bearer);
    const names = async (server: Server) =>
      [...(await (await call(server, '/plants')).text()).matchAll(/"name":"(\w+)"/g)].map(
        (m) => m[1],
      );
    const stop = async (server: Server) => {
      server.child.kill('SIGTERM');
      assert.equal((await server.exited).code, 0);
    };

    const before = await startServer(t, ['--database-url', url]);
    const given: { id: bigint; etag: string }[] = [];
    for (const name of ['a', 'b']) given.push(await create(before, name));
    const backup = join(dir, 'plantstore.dump');
    const backedUp = await runCli(['backup', backup, '--database-url', url]);
    assert.equal(backedUp.code, 0, backedUp.stderr);
    assert.match(
      backedUp.stderr,
      /^backed up the PostgreSQL store to .*plantstore\.dump \(schema version \d+\)\n$/,
    );
    assert.equal(statSync(backup).mode & 0o777, 0o600, 'it holds token hashes');
    const again = await runCli(['backup', backup, '--database-url', url]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /plantstore\.dump exists already: name a new file for the backup/);

    for (const name of ['c', 'd', 'e']) given.push(await create(before, name));
    const seen = await positions(before, 0n);
    assert.equal(seen.length, 5);
    const newest = seen.at(-1)!;

    const refused = await runCli(['restore', backup, '--database-url', url]);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /connections of a plantstore server are open on this database: stop the servers/,
    );
    assert.deepEqual(await names(before), ['a', 'b', 'c', 'd', 'e'], 'nothing restored');
    // The restore finds a server by its connections' name: all of them carry it, the one that
    // listens for notifications too (all a server holds once its pool has been idle a while).
    const watcher = new pg.Client({ connectionString: url });
    await watcher.connect();
    try {
      const others = `SELECT application_name AS name, query FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()`;
      let rows: { name: string; query: string }[] = [];
      while (!rows.some(({ query }) => query.startsWith('LISTEN'))) {
        rows = (await watcher.query<{ name: string; query: string }>(others)).rows;
      }
      assert.deepEqual(
        rows.filter(({ name }) => name !== 'plantstore'),
        [],
      );
    } finally {
      await watcher.end();
    }
    await stop(before);

    const restored = await runCli(['restore', backup, '--database-url', url]);
    assert.equal(restored.code, 0, restored.stderr);
    assert.match(
      restored.stderr,
      new RegExp(
        `^restored the PostgreSQL store from .*plantstore\\.dump \\(schema version \\d+\\); ` +
          `the changes feed goes on after position ${newest + 1n}: a reader resuming`,
      ),
    );

    const after = await startServer(t, ['--database-url', url]);
    assert.deepEqual(await names(after), ['a', 'b']);
    await gone(after, [0n, seen[1]!, newest]);
    // No id, and no entity tag, a client was given before the restore is given again.
    const f = await create(after, 'f');
    assert.ok(given.every(({ id }) => f.id > id));
    assert.ok(given.every(({ etag }) => f.etag !== etag));
    const next = await positions(after, newest + 1n);
    assert.equal(next.length, 1);
    assert.ok(next[0]! > newest + 1n, 'a new event never takes a position handed out before');
    await stop(after);

    // A backup that pg_restore cannot read changes nothing.
    const broken = join(dir, 'broken.dump');
    writeFileSync(broken, 'PGDMP not really');
    const failed = await runCli(['restore', broken, '--database-url', url]);
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /^plantstore: pg_restore failed \(exit 1\): /);
    // Another tool's schema_migrations table (golang-migrate's) is no plantstore backup.
    const otherUrl = await freshOwnDatabase(t);
    await adminRun(
      otherUrl,
      `CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
       INSERT INTO schema_migrations VALUES (3, false); CREATE TABLE customers (id int)`,
    );
    const other = join(dir, 'other.dump');
    execFileSync('pg_dump', ['--format=custom', `--file=${other}`, otherUrl]);
    const foreign = await runCli(['restore', other, '--database-url', url]);
    assert.equal(foreign.code, 1);
    assert.match(foreign.stderr, /other\.dump holds no plantstore store in the schema public/);
    // An object of the user's that depends on the store stops the restore, named.
    await adminRun(url, 'CREATE VIEW plant_names AS SELECT name FROM plants');
    const depended = await runCli(['restore', backup, '--database-url', url]);
    assert.equal(depended.code, 1);
    assert.match(
      depended.stderr,
      /^plantstore: psql failed \(exit 3\): .*view plant_names depends on table plants/,
    );
    await adminRun(url, 'DROP VIEW plant_names');
    // A second restore of the same backup: the positions carried on again, past `f`'s, so
    // none of the refusals above changed anything.
    const twice = await runCli(['restore', backup, '--database-url', url]);
    assert.equal(twice.code, 0, twice.stderr);
    assert.match(twice.stderr, new RegExp(`goes on after position ${next[0]! + 1n}: `));
    const last = await startServer(t, ['--database-url', url]);
    assert.deepEqual(await names(last), ['a', 'b']);
    await stop(last);
  },
);

test(
  'PostgreSQL: a backup older than the changes feed is migrated, and the feed still moves on',
  { skip: POSTGRES_SKIP },
  async (t) => {
    const [url, oldUrl] = [await freshOwnDatabase(t), await freshOwnDatabase(t)];
    const migrations = loadMigrations('postgres');
    const feed = migrations.find((m) => m.name === 'changes_feed')!.version;
    // A store at the schema just before the feed, backed up.
    await migratePostgres(
      oldUrl,
      migrations.filter((m) => m.version < feed),
      silentLog,
    );
    const backup = join(makeTempDir(t), 'old.dump');
    assert.equal((await backupPostgres(oldUrl, backup)).version, feed - 1);
    // The store it replaces has handed out positions 1 to 3.
    const store = await openStore({ db: '', databaseUrl: url });
    try {
      for (const name of ['a', 'b', 'c']) await store.plants.insert({ name });
    } finally {
      await store.close();
    }

    const report = await restorePostgres(url, backup);
    assert.deepEqual(report, { version: migrations.at(-1)!.version, eventsAfter: 4n });
    // Over a store older than server-assigned ids, whose ids no record tells apart: said so.
    const older = await freshOwnDatabase(t);
    const serverIds = migrations.find((m) => m.name === 'server_ids')!.version;
    await migratePostgres(
      older,
      migrations.filter((m) => m.version < serverIds),
      silentLog,
    );
    assert.equal(
      (await restorePostgres(older, backup)).idsNotCarried,
      'its schema is older than server-assigned ids',
    );
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query(
        `SELECT (SELECT position FROM event_horizon) AS horizon,
           (SELECT count(*) FROM plants)::int AS plants,
           pg_sequence_last_value(pg_get_serial_sequence('audit_log', 'seq')::regclass) AS seq`,
      );
      assert.deepEqual(rows[0], { horizon: '4', plants: 0, seq: '4' });
    } finally {
      await client.end();
    }
  },
);

test(
  'PostgreSQL: a restore replaces a plantstore store or nothing, and ends when psql stops',
  { skip: POSTGRES_SKIP },
  async (t) => {
    const [url, appUrl] = [await freshOwnDatabase(t), await freshOwnDatabase(t)];
    // A backup larger than a pipe holds: psql stopping early leaves pg_restore blocked.
    assert.equal((await runCli(['token', 'create', '--database-url', url])).code, 0);
    await adminRun(
      url,
      `INSERT INTO plants (id, name) SELECT n, repeat('x', 100) || n FROM generate_series(1, 5000) n`,
    );
    const backup = join(makeTempDir(t), 'big.dump');
    assert.equal((await runCli(['backup', backup, '--database-url', url])).code, 0);
    await adminRun(url, 'CREATE VIEW plant_names AS SELECT name FROM plants');
    const stopped = await runCli(['restore', backup, '--database-url', url]);
    assert.equal(stopped.code, 1);
    assert.match(stopped.stderr, /view plant_names depends on table plants/);

    // Another application's tables by plantstore's names, with no store: left alone.
    await adminRun(
      appUrl,
      `CREATE TABLE tokens (id int, secret text); INSERT INTO tokens VALUES (1, 'theirs')`,
    );
    const theirs = await runCli(['restore', backup, '--database-url', appUrl]);
    assert.equal(theirs.code, 1);
    assert.match(
      theirs.stderr,
      /^plantstore: the schema public holds tables named like plantstore's \(tokens\) but no plantstore store\n$/,
    );
    // Another tool's schema_migrations beside them: the same.
    await adminRun(
      appUrl,
      `CREATE TABLE schema_migrations (version bigint, dirty boolean);
       INSERT INTO schema_migrations VALUES (20240101120000, false)`,
    );
    const migrated = await runCli(['restore', backup, '--database-url', appUrl]);
    assert.equal(migrated.code, 1);
    assert.match(migrated.stderr, /the schema public holds another tool's schema_migrations/);
    const client = new pg.Client({ connectionString: appUrl });
    await client.connect();
    try {
      assert.deepEqual((await client.query('SELECT secret FROM tokens')).rows, [
        { secret: 'theirs' },
      ]);
    } finally {
      await client.end();
    }
  },
);

test(
  'PostgreSQL: a restore gives no new plant an id that clients chose after the backup',
  { skip: POSTGRES_SKIP },
  async (t) => {
    const url = await freshOwnDatabase(t);
    const backup = join(makeTempDir(t), 'ids.dump');
    const withStore = async <T>(work: (store: Store) => Promise<T>) => {
      const store = await openStore({ db: '', databaseUrl: url });
      try {
        return await work(store);
      } finally {
        await store.close();
      }
    };
    await withStore(async (store) => {
      assert.equal((await store.plants.insert({ name: 'a' })).id, 1n);
      await backupPostgres(url, backup);
      // Chosen just above the counter and far above it; one deleted again: a plant once had it.
      for (const id of [3n, 4n, 6n, 40n]) await store.plants.insert({ id, name: `chosen ${id}` });
      assert.equal(await store.plants.delete(4n), true);
    });
    await restorePostgres(url, backup);
    const given = await withStore(async (store) => {
      const ids: bigint[] = [];
      for (let i = 0; i < 6; i++) ids.push((await store.plants.insert({ name: `new ${i}` })).id);
      return ids;
    });
    assert.deepEqual(given, [2n, 5n, 7n, 8n, 9n, 10n]);
  },
);

test(
  'PostgreSQL: Ctrl-C stops a backup or a restore, leaving no file and the store as it was',
  { skip: POSTGRES_SKIP },
  async (t) => {
    const url = await freshOwnDatabase(t);
    const dir = makeTempDir(t);
    assert.equal((await runCli(['token', 'create', '--database-url', url])).code, 0);
    await adminRun(url, `INSERT INTO plants (id, name) VALUES (1, 'kept')`);
    const backup = join(dir, 'first.dump');
    assert.equal((await runCli(['backup', backup, '--database-url', url])).code, 0);
    await adminRun(url, `UPDATE plants SET name = 'newer'`);
    // A session that holds the plants table: pg_dump waits for it, and so do the restore's drops.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    // Ended by the test; if an assertion fails first, by the database's drop (WITH FORCE).
    holder.on('error', () => undefined);
    await holder.query('BEGIN; LOCK TABLE plants IN ACCESS EXCLUSIVE MODE');
    /** Whether a session of `application` waits on a lock. */
    const waiting = async (application: string) => {
      // pg_stat_activity is read once a transaction, and the holder's is a long one.
      await holder.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await holder.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid)
         WHERE NOT l.granted AND a.application_name = $1`,
        [application],
      );
      return rows[0]!.n > 0;
    };
    /** Runs plantstore until its session of `application` waits on a lock; then interrupts it. */
    const blocked = async (args: string[], application: string) => {
      const child = spawn(process.execPath, [join(ROOT, 'bin', 'plantstore'), ...args], {
        env: cleanEnv(),
      });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const closed = once(child, 'close');
      // Unless it ends first: then its answer says why.
      while (child.exitCode === null && !(await waiting(application))) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      child.kill('SIGINT');
      const [code] = (await closed) as [number | null];
      return { code, stderr };
    };
    const second = join(dir, 'second.dump');
    const dumped = await blocked(['backup', second, '--database-url', url], 'pg_dump');
    assert.deepEqual(dumped, {
      code: 130,
      stderr: 'plantstore: interrupted: no backup was written\n',
    });
    assert.deepEqual(readdirSync(dir), ['first.dump'], 'no partial file left');

    const restore = ['restore', backup, '--database-url', url];
    assert.deepEqual(await blocked(restore, 'psql'), {
      code: 130,
      stderr: 'plantstore: interrupted: the store was not replaced, it is as it was\n',
    });

    // Stopped earlier, while it reads how far the replaced store's counters went (a lock holds
    // it there): it goes no further.
    await holder.query('LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE');
    assert.deepEqual(await blocked(restore, 'plantstore restore'), {
      code: 130,
      stderr: 'plantstore: interrupted: the store was not replaced, it is as it was\n',
    });
    await holder.query('COMMIT');
    const { rows } = await holder.query('SELECT name FROM plants');
    await holder.end();
    assert.deepEqual(rows, [{ name: 'newer' }]);
  },
);

test(
  'PostgreSQL: a backup killed outright (SIGKILL) stops pg_dump at its next write',
  { skip: POSTGRES_SKIP },
  async (t) => {
    const url = await freshOwnDatabase(t);
    const dir = makeTempDir(t);
    assert.equal((await runCli(['token', 'create', '--database-url', url])).code, 0);
    await adminRun(
      url,
      `INSERT INTO plants (id, name) SELECT i, 'p' || i FROM generate_series(1, 1000) i`,
    );
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    holder.on('error', () => undefined);
    t.after(() => holder.end().catch(() => undefined));
    await holder.query('BEGIN; LOCK TABLE plants IN ACCESS EXCLUSIVE MODE');
    /** The sessions of pg_dump: waiting on the lock, `waiting`, or any. */
    const dumps = async (waiting: boolean) => {
      await holder.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await holder.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity a
         WHERE a.application_name = 'pg_dump' AND a.datname = current_database()
           AND (NOT $1 OR EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted))`,
        [waiting],
      );
      return rows[0]!.n;
    };
    const child = spawn(
      process.execPath,
      [join(ROOT, 'bin', 'plantstore'), 'backup', join(dir, 'killed.dump'), '--database-url', url],
      { env: cleanEnv() },
    );
    const closed = once(child, 'close');
    while (child.exitCode === null && (await dumps(true)) === 0) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    child.kill('SIGKILL');
    await closed;
    // pg_dump goes on once the lock is free: its first write of the dump finds no reader.
    await holder.query('COMMIT');
    const deadline = Date.now() + 30_000;
    while ((await dumps(false)) > 0) {
      assert.ok(Date.now() < deadline, 'pg_dump still connected 30 s after its backup died');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // Nothing could remove the private file of a process killed outright; nothing was
    // written to it either: before, pg_dump wrote the whole dump there, unasked.
    const left = readdirSync(dir);
    assert.equal(left.length, 1, left.join(' '));
    assert.match(left[0]!, /^\.killed\.dump\.\d+\.partial$/);
    assert.equal(statSync(join(dir, left[0]!)).size, 0);
    // The next backup of that name removes it.
    const again = await runCli(['backup', join(dir, 'killed.dump'), '--database-url', url]);
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(readdirSync(dir), ['killed.dump']);
  },
);
