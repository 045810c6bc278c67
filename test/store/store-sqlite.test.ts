import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { makeTempDir } from '../helpers/setup.js';
import { storeContract } from './store-contract.js';

storeContract('sqlite store contract', async (t) => {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'contract.db') });
  t.after(() => store.close());
  return store;
});

interface MigrationRow {
  version: number;
  name: string;
  applied_at: number;
}

/** The versions of the migration files in the repository, e.g. [1, 2]. */
const migrationFiles = readdirSync(new URL('../../migrations/sqlite/', import.meta.url))
  .filter((file) => file.endsWith('.sql'))
  .map((file) => Number(file.slice(0, 4)))
  .sort((a, b) => a - b);

function recorded(file: string): MigrationRow[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT * FROM schema_migrations ORDER BY version').all() as MigrationRow[];
  } finally {
    db.close();
  }
}

describe('sqlite migrations', () => {
  it('records every migration in schema_migrations on a new database', async (t) => {
    const file = join(makeTempDir(t), 'new.db');
    const before = Date.now();
    await openSqliteStore({ file }).close();
    const rows = recorded(file);
    assert.ok(migrationFiles.length > 0);
    assert.deepEqual(
      rows.map((row) => row.version),
      migrationFiles,
    );
    assert.equal(rows[0]?.name, 'init');
    for (const row of rows) assert.ok(row.applied_at >= before && row.applied_at <= Date.now());
  });

  it('creates the database directory when it is missing', async (t) => {
    const file = join(makeTempDir(t), 'a', 'b', 'nested.db');
    const store = openSqliteStore({ file });
    await store.ping();
    await store.close();
    assert.equal(recorded(file).length, migrationFiles.length);
  });

  it('re-opening an existing database applies nothing again and keeps the data', async (t) => {
    const file = join(makeTempDir(t), 'reopen.db');
    const first = openSqliteStore({ file });
    await first.plants.insert({ id: 9223372036854775807n, name: 'kept' });
    await first.close();
    const rows = recorded(file);
    const again = openSqliteStore({ file });
    t.after(() => again.close());
    assert.deepEqual(await again.plants.get(9223372036854775807n), {
      id: 9223372036854775807n,
      name: 'kept',
    });
    assert.deepEqual(recorded(file), rows);
  });

  it('applies a version a database skipped, though a later one is applied', async (t) => {
    // A database that ran a development branch's 0003 before 0002 existed.
    const file = join(makeTempDir(t), 'skipped.db');
    await openSqliteStore({ file }).close();
    const db = new Database(file);
    db.exec('DROP TABLE audit_log; DROP TABLE idempotency_keys');
    db.prepare('DELETE FROM schema_migrations WHERE version = 2').run();
    db.close();
    const store = openSqliteStore({ file });
    t.after(() => store.close());
    assert.deepEqual(store.migration.applied, [2]);
    assert.deepEqual(
      recorded(file).map((row) => row.version),
      migrationFiles,
    );
    await store.plants.insert({ id: 1n, name: 'audited' });
    assert.equal((await store.audit.list({ limit: 10 })).length, 1);
  });

  it('refuses a database whose schema is newer than the code knows', async (t) => {
    const file = join(makeTempDir(t), 'newer.db');
    await openSqliteStore({ file }).close();
    const newer = (migrationFiles.at(-1) ?? 0) + 1;
    const db = new Database(file);
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(newer, 'future', Date.now());
    db.close();
    assert.throws(
      () => openSqliteStore({ file }),
      (error: unknown) =>
        error instanceof Error &&
        error.message.includes(`version ${newer}`) &&
        /newer/.test(error.message) &&
        /upgrade plantstore/.test(error.message),
    );
    // Nothing was applied or removed by the refused open.
    assert.equal(recorded(file).at(-1)?.version, newer);
  });
});

describe('sqlite file modes', () => {
  const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

  /** The common umask, which would leave new files readable by every local user. */
  function commonUmask(t: TestContext): void {
    const previous = process.umask(0o022);
    t.after(() => process.umask(previous));
  }

  it('creates a missing directory 0700 and the database, -wal and -shm files 0600', async (t) => {
    commonUmask(t);
    const top = join(makeTempDir(t), 'data');
    const file = join(top, 'inner', 'plantstore.db');
    const store = openSqliteStore({ file });
    t.after(() => store.close());
    await store.plants.insert({ id: 1n, name: 'Fern' });
    assert.deepEqual([top, join(top, 'inner'), file, `${file}-wal`, `${file}-shm`].map(mode), [
      '700',
      '700',
      '600',
      '600',
      '600',
    ]);
  });

  it('leaves the mode of a directory and a database file that exist alone', async (t) => {
    commonUmask(t);
    const directory = join(makeTempDir(t), 'shared');
    mkdirSync(directory);
    chmodSync(directory, 0o755);
    const file = join(directory, 'plantstore.db');
    const store = openSqliteStore({ file });
    await store.plants.insert({ id: 1n, name: 'Fern' });
    await store.close();
    chmodSync(file, 0o644);
    const again = openSqliteStore({ file });
    t.after(() => again.close());
    assert.deepEqual(await again.plants.get(1n), { id: 1n, name: 'Fern' });
    assert.deepEqual([directory, file].map(mode), ['755', '644']);
  });

  it('leaves an empty file made beforehand with its mode, and uses it', async (t) => {
    commonUmask(t);
    const file = join(makeTempDir(t), 'given.db');
    writeFileSync(file, '', { mode: 0o640 });
    const store = openSqliteStore({ file });
    t.after(() => store.close());
    await store.plants.insert({ id: 1n, name: 'Fern' });
    assert.deepEqual([file, `${file}-wal`].map(mode), ['640', '640']);
  });
});
