import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { silentLog } from '../../src/core/log.js';
import { GroupCommit } from '../../src/store/sqlite/group-commit.js';
import { makeTempDir } from '../helpers/setup.js';

/** A writer with group commit, and a second connection that sees only committed data. */
function open(t: Parameters<typeof makeTempDir>[0]) {
  const file = join(makeTempDir(t), 'gc.db');
  const writer = new Database(file);
  writer.pragma('journal_mode = WAL');
  writer.pragma('synchronous = FULL');
  writer.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
  const reader = new Database(file, { readonly: true });
  t.after(() => {
    reader.close();
    writer.close();
  });
  const insert = writer.prepare('INSERT INTO t (id, v) VALUES (?, ?)');
  const committed = (id: number) =>
    reader.prepare('SELECT count(*) FROM t WHERE id = ?').pluck().get(id) === 1;
  return { writer, batches: new GroupCommit(writer), insert, committed };
}

test('writes issued together share one transaction', async (t) => {
  const { batches, insert } = open(t);
  await Promise.all(Array.from({ length: 50 }, (_, i) => batches.run(() => insert.run(i, 'x'))));
  assert.equal(batches.commits, 1);
  await batches.run(() => insert.run(100, 'later'));
  assert.equal(batches.commits, 2);
});

test('no write is settled before its batch is committed', async (t) => {
  const { batches, insert, committed } = open(t);
  const seenAtSettle: boolean[] = [];
  const writes = Array.from({ length: 20 }, (_, i) =>
    batches.run(() => insert.run(i, 'x')).then(() => seenAtSettle.push(committed(i))),
  );
  // Queued, not yet run: another connection sees none of them.
  assert.equal(committed(0), false);
  await Promise.all(writes);
  assert.deepEqual(seenAtSettle, Array(20).fill(true));
});

test('a failing write in a batch fails alone, and leaves nothing behind', async (t) => {
  const { batches, insert, committed } = open(t);
  const outcomes = await Promise.allSettled([
    batches.run(() => insert.run(1, 'ok')),
    batches.run(() => {
      insert.run(2, 'half done');
      throw new Error('rule broken after a first statement');
    }),
    batches.run(() => insert.run(1, 'duplicate')),
    batches.run(() => insert.run(3, 'ok')),
  ]);
  assert.deepEqual(
    outcomes.map((o) => o.status),
    ['fulfilled', 'rejected', 'rejected', 'fulfilled'],
  );
  assert.equal(batches.commits, 1);
  assert.equal(committed(1), true);
  assert.equal(committed(2), false, 'the failed write was rolled back to its savepoint');
  assert.equal(committed(3), true);
});

test('flushAll commits what is queued, synchronously', (t) => {
  const { batches, insert, committed } = open(t);
  void batches.run(() => insert.run(9, 'x'));
  batches.flushAll();
  assert.equal(committed(9), true);
});

test('when the commit fails, every write of the batch fails and none is kept', async (t) => {
  const { writer: db, batches, insert, committed } = open(t);
  db.pragma('foreign_keys = ON');
  db.exec(`CREATE TABLE child (parent INTEGER REFERENCES t (id) DEFERRABLE INITIALLY DEFERRED)`);
  const orphan = db.prepare('INSERT INTO child (parent) VALUES (404)');
  // A deferred foreign key is checked at COMMIT: the statements succeed, the commit fails.
  const outcomes = await Promise.allSettled([
    batches.run(() => insert.run(1, 'ok')),
    batches.run(() => orphan.run()),
  ]);
  assert.deepEqual(
    outcomes.map((o) => o.status),
    ['rejected', 'rejected'],
  );
  assert.equal(committed(1), false);
  assert.equal(db.inTransaction, false);
  await batches.run(() => insert.run(2, 'next batch works'));
  assert.equal(committed(2), true);
});

test('a batch whose COMMIT and ROLLBACK both fail is refused and logged, not thrown', async () => {
  // A disk that fails under SQLite is hard to stage: a stand-in database refuses COMMIT
  // and ROLLBACK. Before the fix the ROLLBACK error escaped setImmediate and ended the process.
  const failing = (sql: string) => () => {
    if (sql === 'COMMIT' || sql === 'ROLLBACK') throw new Error(`disk I/O error on ${sql}`);
  };
  const db = {
    inTransaction: true,
    prepare: (sql: string) => ({ run: failing(sql) }),
    exec: (sql: string) => failing(sql)(),
  } as unknown as Database.Database;
  const logged: string[] = [];
  const log = { ...silentLog, error: (_: unknown, message: string) => logged.push(message) };
  const batches = new GroupCommit(db, log);
  const outcomes = await Promise.allSettled([batches.run(() => 1), batches.run(() => 2)]);
  assert.deepEqual(
    outcomes.map((o) => (o.status === 'rejected' ? (o.reason as Error).message : 'resolved')),
    ['disk I/O error on COMMIT', 'disk I/O error on COMMIT'],
  );
  assert.deepEqual(logged, ['could not roll back a failed group commit']);
});
