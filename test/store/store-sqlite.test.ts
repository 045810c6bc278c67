import assert from 'node:assert/strict';
import {
  chmodSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { loadMigrations } from '../../src/store/migrations.js';
import { UNKNOWN_VERSION } from '../../src/store/rows.js';
import { migrateSqlite } from '../../src/store/sqlite/migrate.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { PlantService } from '../../src/service/plant-service.js';
import { ApiError } from '../../src/core/errors.js';
import { SQLITE } from '../helpers/backends.js';
import { listed } from '../helpers/listed.js';
import { makeTempDir } from '../helpers/setup.js';

// What only SQLite has: its migrations, its file and directory. The store contract runs on
// SQLite and PostgreSQL alike (store-contract.test.ts).

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

describe('sqlite migrations', { skip: SQLITE.skip }, () => {
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

  it('answers a plant read at once, not as a promise, and so does the service', async (t) => {
    const store = openSqliteStore({ file: join(makeTempDir(t), 'at-once.db') });
    t.after(() => store.close());
    await store.plants.insert({ id: 1n, name: 'fern' });
    // The read of GET /plants/{id} then sends its answer before its handler returns.
    const read = store.plants.get(1n);
    assert.ok(!(read instanceof Promise));
    assert.equal(read?.name, 'fern');
    const service = new PlantService(store.plants, store.idempotency);
    const served = service.get(1n);
    assert.ok(!(served instanceof Promise));
    assert.equal(served.name, 'fern');
    assert.throws(
      () => service.get(2n),
      (error: unknown) => error instanceof ApiError && error.errorName === 'plantNotFound',
    );
  });

  it(
    'reads the database file through a memory map, not read(2)',
    { skip: process.platform !== 'linux' && '/proc/self/maps is Linux only' },
    async (t) => {
      const file = join(makeTempDir(t), 'mapped.db');
      const store = openSqliteStore({ file });
      t.after(() => store.close());
      await store.plants.insert({ id: 1n, name: 'mapped' });
      assert.equal((await store.plants.get(1n))?.name, 'mapped');
      // SQLite maps the file at its first read once mmap_size allows it (open.ts).
      const maps = readFileSync('/proc/self/maps', 'utf8').split('\n');
      assert.ok(
        maps.some((line) => line.endsWith(` ${realpathSync(file)}`)),
        'the database file is not mapped into the process',
      );
    },
  );

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
    const kept = await first.plants.insert({ id: 9223372036854775807n, name: 'kept' });
    await first.close();
    const rows = recorded(file);
    const again = openSqliteStore({ file });
    t.after(() => again.close());
    // The version too: an entity tag a client holds stays valid across restarts.
    assert.deepEqual(await again.plants.get(9223372036854775807n), {
      id: 9223372036854775807n,
      name: 'kept',
      version: kept.version,
    });
    assert.deepEqual(recorded(file), rows);
  });

  it('applies a version a database skipped, though a later one is applied', async (t) => {
    // A database that ran a development branch's later versions before 0003 existed. (0003
    // adds nothing on SQLite; an earlier one would meet the later ones' changes to its
    // tables, as 0005's to idempotency_keys.)
    const file = join(makeTempDir(t), 'skipped.db');
    await openSqliteStore({ file }).close();
    const db = new Database(file);
    db.prepare('DELETE FROM schema_migrations WHERE version = 3').run();
    db.close();
    const store = openSqliteStore({ file });
    t.after(() => store.close());
    assert.deepEqual(store.migration.applied, [3]);
    assert.deepEqual(
      recorded(file).map((row) => row.version),
      migrationFiles,
    );
  });

  it('0005 gives the plants of an older database versions, and kept answers theirs', async (t) => {
    const file = join(makeTempDir(t), 'before-versions.db');
    const db = new Database(file);
    migrateSqlite(
      db,
      loadMigrations('sqlite').filter((migration) => migration.version < 5),
    );
    db.exec(`INSERT INTO plants (id, name, tag) VALUES (1, 'a', NULL), (2, 'b', 't'), (7, 'c', NULL);
      DELETE FROM plants WHERE id = 7;
      INSERT INTO idempotency_keys (token_id, key, fingerprint, created_at, expires_at,
          lease_until, status, plant_id, plant_name, plant_tag)
        VALUES (1, 'same', 'f', 0, 1, 0, 201, 2, 'b', 't'),
               (1, 'changed', 'f', 0, 1, 0, 201, 1, 'was a', NULL)`);
    db.close();
    const store = openSqliteStore({ file });
    t.after(() => store.close());
    assert.equal(store.migration.applied[0], 5, 'the versions migration first of those applied');
    const [a, b] = [await store.plants.get(1n), await store.plants.get(2n)];
    assert.ok(a !== undefined && b !== undefined);
    assert.notEqual(a.version, b.version);
    assert.deepEqual(await listed(store.plants, { limit: 10 }), [
      { id: 1n, name: 'a' },
      { id: 2n, name: 'b', tag: 't' },
    ]);
    // The AUTOINCREMENT record survived the rebuilt table: 7 was deleted, not forgotten.
    const raw = new Database(file, { readonly: true });
    const seq = raw.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'plants'").pluck().get();
    raw.close();
    assert.equal(seq, 7);
    const at = new Date(0);
    const replay = (key: string) =>
      store.idempotency.claim({ tokenId: 1, key, fingerprint: 'f', at });
    assert.deepEqual(await replay('same'), {
      state: 'answered',
      answer: { status: 201, plant: { id: 2n, name: 'b', tag: 't', version: b.version } },
    });
    // Changed since: no version is known, and the one replayed is no plant's.
    assert.deepEqual(await replay('changed'), {
      state: 'answered',
      answer: { status: 201, plant: { id: 1n, name: 'was a', version: UNKNOWN_VERSION } },
    });
  });

  it('a change made outside plantstore gives the plant a new version too', async (t) => {
    const file = join(makeTempDir(t), 'outside.db');
    const store = openSqliteStore({ file });
    t.after(() => store.close());
    const before = await store.plants.insert({ id: 1n, name: 'Fern' });
    const db = new Database(file);
    db.exec(
      `UPDATE plants SET name = 'Ivy' WHERE id = 1; INSERT INTO plants (id, name) VALUES (2, 'x')`,
    );
    db.close();
    const after = await store.plants.get(1n);
    assert.equal(after?.name, 'Ivy');
    assert.notEqual(after.version, before.version);
    assert.equal(typeof (await store.plants.get(2n))?.version, 'bigint');
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

describe('sqlite file modes', { skip: SQLITE.skip }, () => {
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
    assert.equal((await again.plants.get(1n))?.name, 'Fern');
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
