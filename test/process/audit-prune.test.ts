import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { type Backend, forEachBackend, SQLITE, type TestDatabase } from '../helpers/backends.js';
import { cleanEnv, ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// Keeping the audit trail bounded, as an operator does it with the built CLI: `plantstore
// audit prune --before`, and `serve --audit-retention`, on both databases. Old entries are
// written into the database directly, as years of writes would have left them.

const DAY_MS = 86_400_000;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `plantstore <args>` to its end; the environment sets no option. */
async function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Result> {
  const base = cleanEnv();
  delete base.PLANTSTORE_AUDIT_RETENTION;
  const child = spawn(process.execPath, ['bin/plantstore', ...args], {
    cwd: ROOT,
    env: { ...base, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

/** Audit entries of deletes `daysAgo` back, written as a write of then would have. */
async function writeOldEntries(db: TestDatabase, plantIds: number[], daysAgo: number) {
  if (db.dialect === 'sqlite') {
    for (const id of plantIds) {
      await db.query(
        `INSERT INTO audit_log (at, action, plant_id, token_id, before_name)
         VALUES (?, 'delete', ?, 1, 'old')`,
        [Date.now() - daysAgo * DAY_MS, id],
      );
    }
  } else {
    await db.query(
      `INSERT INTO audit_log (at, action, plant_id, token_id, before_name)
       SELECT now() - make_interval(days => $2), 'delete', unnest($1::bigint[]), 1, 'old'`,
      [plantIds, daysAgo],
    );
  }
}

/** The plant ids of the trail, oldest entry first, as `plantstore audit --json` prints it. */
async function trail(db: TestDatabase): Promise<number[]> {
  const res = await run(['audit', '--json', ...db.args]);
  assert.equal(res.code, 0, res.stderr);
  return res.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { plantId: number }).plantId);
}

/** A database with entries 400 and 100 days old (plants 1 to 3) and two of now (10, 11). */
async function database(t: TestContext, backend: Backend = SQLITE): Promise<TestDatabase> {
  const db = await backend.fresh(t);
  const store = await db.open();
  await store.close();
  await writeOldEntries(db, [1], 400);
  await writeOldEntries(db, [2, 3], 100);
  const again = await db.open();
  try {
    await again.plants.insert({ id: 10n, name: 'Fern' });
    await again.plants.insert({ id: 11n, name: 'Ivy' });
  } finally {
    await again.close();
  }
  assert.deepEqual(await trail(db), [1, 2, 3, 10, 11]);
  return db;
}

describe('audit trail retention', () => {
  forEachBackend((backend) => {
    it(`audit prune --before 90d deletes the older entries only, and says how many`, async (t) => {
      const db = await database(t, backend);
      const before = Date.now();
      const res = await run(['audit', 'prune', '--before', '90d', ...db.args]);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(res.stdout, '');
      const said = /^deleted 3 audit entries written before (\S+)\n$/.exec(res.stderr);
      assert.ok(said, res.stderr);
      const cutoff = Date.parse(said[1]!);
      assert.ok(cutoff >= before - 90 * DAY_MS && cutoff <= Date.now() - 90 * DAY_MS, said[1]);
      assert.deepEqual(await trail(db), [10, 11]);

      const again = await run(['audit', 'prune', '--before', '90d', ...db.args]);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stderr, /^deleted 0 audit entries written before /);
    });

    it(`audit prune --before a date deletes what is older than its midnight`, async (t) => {
      const db = await database(t, backend);
      const day = new Date(Date.now() - 200 * DAY_MS).toISOString().slice(0, 10);
      // The database named before the subcommand, as `audit` takes it, does as well.
      const res = await run(['audit', ...db.args, 'prune', '--before', day]);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(res.stderr, `deleted 1 audit entries written before ${day}T00:00:00.000Z\n`);
      assert.deepEqual(await trail(db), [2, 3, 10, 11]);
    });

    it(`serve --audit-retention 30d deletes the older entries when it starts`, async (t) => {
      const db = await database(t, backend);
      const server = await startServer(t, [...db.args, '--audit-retention', '30d']);
      const line = await server.waitForLog(
        (entry) => entry.msg === 'deleted audit entries past their retention',
        'the audit entries it deleted',
      );
      assert.equal(line.deleted, 3);
      assert.deepEqual(await trail(db), [10, 11]);
      // 30 days keep more than the changes feed's week: nothing to warn of.
      assert.equal(server.logs.filter((entry) => entry.level === 40).length, 0);
    });
  });
});

describe('audit prune and --audit-retention refuse what would lose the trail by mistake', () => {
  it('audit prune without --before, with a time that is none or under a day ago, exits 2', async (t) => {
    const db = await database(t);
    for (const [args, message] of [
      [[], /required option '--before <time>' not specified/],
      [['--before', '90'], /"90" is neither a date-time .* nor a duration/],
      [['--before', 'yesterday'], /"yesterday" is neither/],
      [['--before', '90d', '--since', '30d'], /deletes by --before alone; it takes no --since/],
      [['--plant', '1', '--before', '90d'], /it takes no --plant/],
      // `90m` typed for `90d`: the whole trail, and the changes feed with it.
      [['--before', '90m'], /"90m" ago is less than a day ago; .* give the time itself/],
      [['--before', '23h'], /"23h" ago is less than a day ago/],
    ] as const) {
      const res = await run(['audit', 'prune', ...args, ...db.args]);
      assert.equal(res.code, 2, `${args.join(' ')}: ${res.stderr}`);
      assert.match(res.stderr, message);
    }
    assert.deepEqual(await trail(db), [1, 2, 3, 10, 11]);
  });

  it('serve --audit-retention shorter than --events-retention warns that the feed is shorter', async (t) => {
    const db = join(makeTempDir(t), 'short.db');
    const server = await startServer(t, ['--db', db, '--audit-retention', '2d']);
    const line = await server.waitForLog((entry) => entry.level === 40, 'a warning');
    assert.deepEqual(
      { msg: line.msg, audit: line.auditRetentionMs, events: line.eventsRetentionMs },
      {
        msg: 'the audit retention is shorter than the events retention: the changes feed keeps only what the audit trail keeps',
        audit: 2 * 86_400_000,
        events: 7 * 86_400_000,
      },
    );
  });

  it('serve --audit-retention under a day, or not a duration, exits 2 before it starts', async () => {
    for (const [args, env, message] of [
      [['--audit-retention', '12h'], {}, /"12h" is shorter than the least retention, 1d/],
      [['--audit-retention', '23h'], {}, /"23h" is shorter than the least retention, 1d/],
      [['--audit-retention', 'forever'], {}, /"forever" is not a duration/],
      [[], { PLANTSTORE_AUDIT_RETENTION: '60m' }, /"60m" is shorter than the least retention/],
    ] as const) {
      const res = await run(['serve', '--db', ':memory:', '--port', '0', ...args], env);
      assert.equal(res.code, 2, `${args.join(' ')}: ${res.stderr}`);
      assert.match(res.stderr, message);
      assert.doesNotMatch(res.stdout, /Server listening/);
    }
  });
});
