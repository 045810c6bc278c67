import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { BackupInterrupted } from '../../src/store/backup.js';
import { loadMigrations } from '../../src/store/migrations.js';
import { backupSqlite, restoreSqlite } from '../../src/store/sqlite/backup.js';
import { migrateSqlite } from '../../src/store/sqlite/migrate.js';
import { feedCalls } from '../helpers/feed-calls.js';
import { cleanEnv, ROOT, type Server, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// plantstore backup and restore, as real processes beside a real server.

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function plantstore(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/plantstore', ...args],
      { cwd: ROOT, env: cleanEnv() },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}

async function token(db: string): Promise<string> {
  const run = await plantstore(['token', 'create', '--db', db, '--name', 'backup']);
  assert.equal(run.code, 0, run.stderr);
  return run.stdout.trim();
}

/** Creates plants until `stop` is set; every answered id, in the order answered. */
async function writer(server: Server, bearer: string, state: { stop: boolean; ids: string[] }) {
  while (!state.stop) {
    const res = await fetch(`${server.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: '{"name":"Fern"}',
    });
    const text = await res.text();
    assert.equal(res.status, 201, text);
    state.ids.push(/"id":(-?\d+)/.exec(text)![1]!);
  }
}

/** The plant ids in a database file, read directly, exact. */
function idsIn(file: string): Set<string> {
  const db = new Database(file, { readonly: true });
  try {
    db.defaultSafeIntegers(true);
    const ids = db.prepare('SELECT id FROM plants').pluck().all() as bigint[];
    return new Set(ids.map(String));
  } finally {
    db.close();
  }
}

test('a backup under write load holds every write answered before it began', async (t) => {
  const dir = makeTempDir(t);
  const db = join(dir, 'live.db');
  const backup = join(dir, 'backup.db');
  const bearer = await token(db);
  const server = await startServer(t, ['--db', db]);
  const state = { stop: false, ids: [] as string[] };
  const writers = Array.from({ length: 8 }, () => writer(server, bearer, state));
  while (state.ids.length < 300) await new Promise((resolve) => setImmediate(resolve));

  const answeredBefore = [...state.ids];
  const made = await plantstore(['backup', backup, '--db', db]);
  const answeredDuring = state.ids.length - answeredBefore.length;
  state.stop = true;
  await Promise.all(writers);
  assert.equal(made.code, 0, made.stderr);
  assert.match(made.stderr, /^backed up .* \(\d+ pages, schema version \d+\)\n$/);
  assert.equal(statSync(backup).mode & 0o777, 0o600, 'the backup holds token hashes');

  const copied = idsIn(backup);
  const missing = answeredBefore.filter((id) => !copied.has(id));
  assert.deepEqual(missing, [], `of ${answeredBefore.length} answered before the backup`);
  t.diagnostic(`${answeredDuring} creates answered while the backup ran`);

  const refused = await plantstore(['restore', backup, '--db', db]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /live\.db is in use \(is a server running on it\?\)/);
  const all = state.ids.length;
  assert.equal(idsIn(db).size, all, 'the refused restore changed nothing');

  server.child.kill('SIGTERM');
  assert.equal((await server.exited).code, 0);
  const restored = await plantstore(['restore', backup, '--db', db]);
  assert.equal(restored.code, 0, restored.stderr);
  assert.deepEqual(idsIn(db), copied);

  // The restored database serves, and serves the backup's plants.
  const again = await startServer(t, ['--db', db]);
  const res = await fetch(`${again.url}/plants/${answeredBefore[0]}`, {
    headers: { authorization: `Bearer ${bearer}` },
  });
  assert.equal(res.status, 200, await res.text());
});

test('restore refuses a damaged backup and leaves the database as it was', async (t) => {
  const dir = makeTempDir(t);
  const db = join(dir, 'live.db');
  await token(db);
  const backup = join(dir, 'backup.db');
  assert.equal((await plantstore(['backup', backup, '--db', db])).code, 0);
  const damaged = join(dir, 'damaged.db');
  const bytes = readFileSync(backup);
  bytes.fill(0x5a, 4096, 8192); // the second page: a table's b-tree, overwritten
  writeFileSync(damaged, bytes);
  const before = readFileSync(db);

  const run = await plantstore(['restore', damaged, '--db', db]);
  assert.equal(run.code, 1);
  assert.match(
    run.stderr,
    /^plantstore: .*damaged\.db (failed SQLite's integrity_check|is not a plantstore database)/,
  );
  assert.deepEqual(readFileSync(db), before);

  const notOurs = join(dir, 'other.db');
  new Database(notOurs).exec('CREATE TABLE t (x)').close();
  const other = await plantstore(['restore', notOurs, '--db', db]);
  assert.equal(other.code, 1);
  assert.match(other.stderr, /other\.db is not a plantstore database/);
});

/** The names of the tokens in a database file, read directly. */
function tokenNames(file: string): string[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT name FROM tokens ORDER BY id').pluck().all() as string[];
  } finally {
    db.close();
  }
}

test('restore through a symbolic link restores the file it leads to, and keeps the link', async (t) => {
  const dir = makeTempDir(t);
  mkdirSync(join(dir, 'volume'));
  mkdirSync(join(dir, 'data'));
  const real = join(dir, 'volume', 'real.db');
  const link = join(dir, 'data', 't.db');
  symlinkSync('../volume/real.db', link);
  const source = join(dir, 'source.db');
  const run = await plantstore(['token', 'create', '--db', real, '--name', 'old']);
  assert.equal(run.code, 0, run.stderr);
  await plantstore(['token', 'create', '--db', source, '--name', 'new']);
  const good = join(dir, 'good.db');
  assert.equal((await plantstore(['backup', good, '--db', source])).code, 0);

  const server = await startServer(t, ['--db', link]);
  const refused = await plantstore(['restore', good, '--db', link]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, / is in use \(is a server running on it\?\)/);
  server.child.kill('SIGTERM');
  assert.equal((await server.exited).code, 0);

  const restored = await plantstore(['restore', good, '--db', link]);
  assert.equal(restored.code, 0, restored.stderr);
  assert.ok(lstatSync(link).isSymbolicLink(), 'the link is still a link');
  assert.equal(readlinkSync(link), '../volume/real.db');
  assert.deepEqual(tokenNames(real), ['new'], 'the file the link leads to is restored');
  assert.deepEqual(readdirSync(join(dir, 'volume')), ['real.db'], 'no copy left beside it');
  assert.deepEqual(readdirSync(join(dir, 'data')), ['t.db']);
  assert.equal(
    restored.stderr.split(' from ')[0],
    `restored ${link} (a link to ${real})`,
    restored.stderr,
  );

  const dangling = join(dir, 'data', 'dangling.db');
  symlinkSync('../volume/missing.db', dangling);
  const nowhere = await plantstore(['restore', good, '--db', dangling]);
  assert.equal(nowhere.code, 1);
  assert.equal(
    nowhere.stderr,
    `plantstore: ${dangling} is a symbolic link to ../volume/missing.db, which does not exist: ` +
      'restore onto the path where the database should be, or remove the link\n',
  );
  assert.ok(lstatSync(dangling).isSymbolicLink());
  assert.deepEqual(readdirSync(join(dir, 'volume')), ['real.db'], 'nothing created');
});

test('backup refuses to overwrite a file or to invent a database, on either database', async (t) => {
  const dir = makeTempDir(t);
  const db = join(dir, 'live.db');
  await token(db);
  const taken = join(dir, 'taken.db');
  copyFileSync(db, taken);
  const overwrite = await plantstore(['backup', taken, '--db', db]);
  assert.equal(overwrite.code, 1);
  assert.match(overwrite.stderr, /taken\.db exists already: name a new file for the backup/);

  const missing = await plantstore(['backup', join(dir, 'b.db'), '--db', join(dir, 'typo.db')]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no database at .*typo\.db/);

  const postgres = await plantstore([
    'backup',
    join(dir, 'b.db'),
    '--database-url',
    'postgres://user@127.0.0.1:1/db',
  ]);
  assert.equal(postgres.code, 1);
  assert.match(postgres.stderr, /^plantstore: PostgreSQL: connect ECONNREFUSED 127\.0\.0\.1:1\n$/);
  assert.deepEqual(readdirSync(dir).sort(), ['live.db', 'taken.db'], 'no backup file left');
});

test('a restore moves the changes feed on: a cursor from before it is 410, none is reused', async (t) => {
  const dir = makeTempDir(t);
  const db = join(dir, 'plantstore.db');
  const made = await plantstore([
    'token',
    'create',
    '--db',
    db,
    '--name',
    'feed',
    '--scopes',
    'plants:read,plants:write,events:read',
  ]);
  assert.equal(made.code, 0, made.stderr);
  const bearer = made.stdout.trim();
  const { create, positions, gone } = feedCalls(bearer);

  const before = await startServer(t, ['--db', db]);
  for (const name of ['a', 'b']) await create(before, name);
  const backup = join(dir, 'backup.db');
  assert.equal((await plantstore(['backup', backup, '--db', db])).code, 0);
  let lastId = 0n;
  for (const name of ['c', 'd', 'e']) lastId = (await create(before, name)).id;
  const seen = await positions(before, 0n);
  assert.equal(seen.length, 5);
  const newest = seen.at(-1)!;
  before.child.kill('SIGTERM');
  assert.equal((await before.exited).code, 0);

  const restored = await plantstore(['restore', backup, '--db', db]);
  assert.equal(restored.code, 0, restored.stderr);
  assert.match(
    restored.stderr,
    new RegExp(`; the changes feed goes on after position ${newest + 1n}: a reader resuming`),
  );

  const after = await startServer(t, ['--db', db]);
  await gone(after, [0n, seen[1]!, newest]);
  const f = await create(after, 'f');
  assert.ok(f.id > lastId, 'no id a client was given before the restore is given again');
  const next = await positions(after, newest + 1n);
  assert.equal(next.length, 1);
  assert.equal(
    next[0]! > newest + 1n,
    true,
    'a new event never takes a position handed out before',
  );
  after.child.kill('SIGTERM');
  assert.equal((await after.exited).code, 0);

  // A damaged database, the usual reason to restore, is restored over all the same: its
  // positions from whichever of their records still reads, and a warning when none does.
  const damage = (tables: string[]) => {
    const layout = new Database(db, { readonly: true });
    const pageSize = layout.pragma('page_size', { simple: true }) as number;
    const root = layout.prepare('SELECT rootpage FROM sqlite_master WHERE name = ?').pluck();
    const roots = tables.map((table) => root.get(table) as number);
    layout.close();
    const bytes = readFileSync(db);
    for (const page of roots) bytes.fill(0xff, (page - 1) * pageSize, page * pageSize);
    writeFileSync(db, bytes);
  };
  damage(['audit_log']);
  const carried = await plantstore(['restore', backup, '--db', db]);
  assert.equal(carried.code, 0, carried.stderr);
  assert.match(
    carried.stderr,
    new RegExp(`; the changes feed goes on after position ${next[0]! + 1n}: `),
    'the AUTOINCREMENT counter still reads',
  );
  damage(['sqlite_sequence', 'audit_log', 'event_horizon', 'plant_id_runs']);
  const over = await plantstore(['restore', backup, '--db', db]);
  assert.equal(over.code, 0, over.stderr);
  assert.match(
    over.stderr,
    /\nplantstore: the replaced database could not be read \(.+\), so the changes feed's positions start again from the backup's: readers of GET \/events must read the plants again/,
  );
  assert.match(
    over.stderr,
    /\nplantstore: the replaced database's plant ids could not be read \(.+\), so ids it handed out or saw clients choose after the backup may be given to new plants\n$/,
  );
});

test('a restore gives no new plant an id that clients chose after the backup', async (t) => {
  const dir = makeTempDir(t);
  // A path SQLite's URIs would misread unescaped: the restore attaches the replaced file.
  const db = join(dir, 'plant?store#1%.db');
  const made = await plantstore(['token', 'create', '--db', db]);
  assert.equal(made.code, 0, made.stderr);
  const { call, create } = feedCalls(made.stdout.trim());
  const before = await startServer(t, ['--db', db]);
  assert.equal((await create(before, 'a')).id, 1n);
  const backup = join(dir, 'backup.db');
  assert.equal((await plantstore(['backup', backup, '--db', db])).code, 0);
  // After the backup, clients choose ids just above the counter and far above it; one such
  // plant is deleted again: a plant once had its id all the same.
  for (const id of [3, 4, 6, 40]) {
    const res = await call(before, '/plants', {
      method: 'POST',
      body: JSON.stringify({ id, name: `chosen ${id}` }),
    });
    assert.equal(res.status, 201, await res.text());
  }
  assert.equal((await call(before, '/plants/4', { method: 'DELETE' })).status, 204);
  before.child.kill('SIGTERM');
  assert.equal((await before.exited).code, 0);

  const restored = await plantstore(['restore', backup, '--db', db]);
  assert.equal(restored.code, 0, restored.stderr);
  assert.doesNotMatch(restored.stderr, /could not be read/);
  const after = await startServer(t, ['--db', db]);
  const given: bigint[] = [];
  for (let i = 0; i < 6; i++) given.push((await create(after, `new ${i}`)).id);
  assert.deepEqual(given, [2n, 5n, 7n, 8n, 9n, 10n]);
  after.child.kill('SIGTERM');
  assert.equal((await after.exited).code, 0);
});

test('a backup or restore stopped by a signal leaves no copy behind and changes nothing', async (t) => {
  const dir = makeTempDir(t);
  const db = join(dir, 'plantstore.db');
  assert.equal((await plantstore(['token', 'create', '--db', db])).code, 0);
  const backup = join(dir, 'backup.db');
  assert.equal((await plantstore(['backup', backup, '--db', db])).code, 0);
  const files = readdirSync(dir).sort();
  const before = readFileSync(db);
  // The signal came while the copy was being made: it is removed, and nothing takes a name.
  const stopped = AbortSignal.abort();
  await assert.rejects(backupSqlite(db, join(dir, 'second.db'), stopped), BackupInterrupted);
  await assert.rejects(restoreSqlite(backup, db, stopped), /the store was not replaced/);
  assert.deepEqual(readdirSync(dir).sort(), files);
  assert.deepEqual(readFileSync(db), before);
});

test('a backup or restore removes the copies its killed predecessors left, not a live one', async (t) => {
  const dir = makeTempDir(t);
  const db = join(dir, 'plantstore.db');
  assert.equal((await plantstore(['token', 'create', '--db', db])).code, 0);
  // The pid of a process that has ended, as a backup killed outright would have had.
  const dead = spawnSync('true').pid!;
  const backup = join(dir, 'backup.db');
  const left = [`backup.db.partial-${dead}`, `plantstore.db.partial-${dead}`];
  // One that belongs to a process that runs: a backup of the same name under way.
  const running = `backup.db.partial-${process.pid}`;
  for (const name of [...left, running]) writeFileSync(join(dir, name), 'half a copy');
  assert.equal((await plantstore(['backup', backup, '--db', db])).code, 0);
  assert.ok(!readdirSync(dir).includes(left[0]!), 'the dead backup copy is gone');
  assert.ok(readdirSync(dir).includes(running), 'a running backup keeps its copy');
  assert.equal((await plantstore(['restore', backup, '--db', db])).code, 0);
  assert.deepEqual(readdirSync(dir).sort(), ['backup.db', 'plantstore.db', running].sort());
});

test('a restore over a store older than server-assigned ids says their ids are not carried', async (t) => {
  const dir = makeTempDir(t);
  const old = join(dir, 'old.db');
  const db = new Database(old);
  const migrations = loadMigrations('sqlite');
  const serverIds = migrations.find((m) => m.name === 'server_ids')!.version;
  migrateSqlite(
    db,
    migrations.filter((m) => m.version < serverIds),
  );
  db.prepare(`INSERT INTO plants (name) VALUES ('a'), ('b')`).run();
  db.close();
  const backup = join(dir, 'new.db');
  assert.equal((await plantstore(['token', 'create', '--db', join(dir, 'fresh.db')])).code, 0);
  assert.equal((await plantstore(['backup', backup, '--db', join(dir, 'fresh.db')])).code, 0);
  const report = await restoreSqlite(backup, old);
  assert.equal(report.idsNotCarried, 'its schema is older than server-assigned ids');
});
