import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { forEachBackend } from '../helpers/backends.js';
import {
  cli,
  LISTENING,
  type LogLine,
  type Server,
  startServer,
} from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// GET /metrics on a listener of its own, from a real process, alone and with --workers;
// each scrape checked by Prometheus' own checker, promtool.

/**
 * Why promtool cannot check the scrapes here, or false. Skipped loudly where it is missing,
 * but never in CI (CI=true, as .ci/run runs, installing Debian's prometheus package for it).
 */
const PROMTOOL_SKIP = promtoolSkip();

function promtoolSkip(): string | false {
  const found = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  if (found.error === undefined && found.status === 0) return false;
  const problem = `promtool cannot run (${found.error?.message ?? found.stderr.trim()})`;
  if (process.env.CI === 'true') {
    throw new Error(`${problem}: CI=true, so the /metrics scrapes must be checked by it`);
  }
  const reason = `SKIPPED: ${problem}; apt-get install prometheus to check /metrics with it`;
  console.warn(`\n*** metrics.test.ts ${reason} ***\n`);
  return reason;
}

/** Runs `promtool check metrics` on a scrape: fails the test with what promtool says. */
function promtoolCheck(t: TestContext, text: string): void {
  if (PROMTOOL_SKIP) {
    t.diagnostic(PROMTOOL_SKIP);
    return;
  }
  const checked = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.equal(
    checked.status,
    0,
    `promtool check metrics exits ${checked.status}:\n${checked.stdout}${checked.stderr}`,
  );
}

const METRICS_AT = /^metrics at (http:\/\/127\.0\.0\.1:\d+\/metrics)$/;

async function metricsUrl(server: Server): Promise<string> {
  const line = await server.waitForLog((l) => METRICS_AT.test(l.msg ?? ''), '"metrics at"');
  return METRICS_AT.exec(line.msg!)![1]!;
}

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function createPlants(server: Server, token: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${server.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"name":"Fern"}',
    });
    assert.equal(res.status, 201);
  }
}

test('--metrics-port serves Prometheus metrics apart from the API', async (t) => {
  const db = join(makeTempDir(t), 'm.db');
  const token = (await cli(['token', 'create', '--db', db, '--name', 'm'])).stdout.trim();
  const server = await startServer(t, ['--db', db, '--metrics-port', '0']);
  const url = await metricsUrl(server);
  await createPlants(server, token, 3);

  const res = await fetch(url);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  assert.equal(
    sample(text, 'plantstore_http_requests_total{route="/plants",method="POST",status="201"}'),
    3,
  );
  assert.ok(sample(text, 'plantstore_sqlite_group_commit_writes_count')! >= 3);
  assert.ok(sample(text, 'plantstore_sqlite_commit_duration_seconds_count')! >= 3);
  for (const own of ['nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
    assert.ok(sample(text, own) !== undefined, own);
  }
  assert.match(text, /^nodejs_gc_duration_seconds_bucket/m);
  promtoolCheck(t, text);
  // Never on the API's port, and nothing else on the metrics port.
  assert.equal((await fetch(`${server.url}/metrics`)).status, 404);
  assert.equal((await fetch(url.replace('/metrics', '/'))).status, 404);
});

test('with --workers, the primary serves the sum of every worker', async (t) => {
  const db = join(makeTempDir(t), 'w.db');
  const scopes = ['--scopes', 'plants:read,plants:write,webhooks:write'];
  const token = (
    await cli(['token', 'create', '--db', db, '--name', 'w', ...scopes])
  ).stdout.trim();
  const server = await startServer(t, [
    ...['--db', db, '--workers', '2', '--metrics-port', '0'],
    ...['--webhook-allow-networks', '127.0.0.0/8'],
  ]);
  const url = await metricsUrl(server);
  // An endpoint where nothing listens: every message stays pending, retried later.
  const endpoint = await fetch(`${server.url}/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: 'http://127.0.0.1:9/hooks' }),
  });
  assert.equal(endpoint.status, 201, await endpoint.text());
  await createPlants(server, token, 10);
  let text = await (await fetch(url)).text();
  assert.equal(
    sample(text, 'plantstore_http_requests_total{route="/plants",method="POST",status="201"}'),
    10,
  );
  promtoolCheck(t, text);
  // The queue is the database's, which every worker counts: the scrape tells it once.
  const queued = new Database(db, { readonly: true });
  const pending = queued.prepare(`SELECT count(*) FROM webhook_messages WHERE status = 'pending'`);
  while (pending.pluck().get() !== 10) await new Promise((resolve) => setTimeout(resolve, 10));
  queued.close();
  text = await (await fetch(url)).text();
  assert.equal(sample(text, 'plantstore_webhook_queue_depth'), 10);
});

test('with --workers, a scrape while a worker restarts answers from the others', async (t) => {
  const db = join(makeTempDir(t), 'r.db');
  const server = await startServer(t, ['--db', db, '--workers', '2', '--metrics-port', '0']);
  const url = await metricsUrl(server);
  const listening = (line: LogLine) => LISTENING.test(line.msg ?? '');
  const workers = () => new Set(server.logs.filter(listening).map((line) => line.pid));
  await server.waitForLog(() => workers().size === 2, 'two workers listening');
  const [dead] = workers();
  process.kill(dead!, 'SIGKILL');
  await server.waitForLog((line) => line.worker === dead, '"worker died"');
  // Its replacement is forked now and answers a moment later: every scrape meanwhile, and
  // after, is whole. (prom-client's own aggregation waited 5 s for it, then answered 500.)
  const statuses = new Set<number>();
  let scrapes = 0;
  while (workers().size < 3) {
    const res = await fetch(url);
    statuses.add(res.status);
    await res.text();
    scrapes += 1;
  }
  const after = await fetch(url);
  statuses.add(after.status);
  assert.ok(sample(await after.text(), 'nodejs_heap_size_used_bytes')! > 0);
  t.diagnostic(`${scrapes} scrapes while the worker restarted`);
  assert.deepEqual([...statuses], [200]);
});

/** The names of the metric families a scrape exports (its `# TYPE` lines). */
const families = (text: string) =>
  [...text.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]!).sort();

forEachBackend((backend) => {
  test('only the database in use has its metrics, and promtool passes them', async (t) => {
    const database = await backend.fresh(t);
    const token = (await cli(['token', 'create', ...database.args, '--name', 'm'])).stdout.trim();
    const server = await startServer(t, [...database.args, '--metrics-port', '0']);
    const url = await metricsUrl(server);
    await createPlants(server, token, 2);
    const text = await (await fetch(url)).text();
    const names = families(text);
    const pool = names.filter((name) => name.startsWith('plantstore_db_'));
    const sqlite = names.filter((name) => name.startsWith('plantstore_sqlite_'));
    if (database.dialect === 'sqlite') {
      assert.deepEqual(pool, [], 'no PostgreSQL statement or pool metrics on SQLite');
      assert.doesNotMatch(text, /^plantstore_db_pool_/m);
      assert.equal(sqlite.length, 2, names.join(' '));
    } else {
      assert.deepEqual(pool, [
        'plantstore_db_pool_connections',
        'plantstore_db_pool_in_use',
        'plantstore_db_pool_max',
        'plantstore_db_pool_waiting',
        'plantstore_db_statement_duration_seconds',
      ]);
      assert.equal(sample(text, 'plantstore_db_pool_max'), 10);
      assert.ok(sample(text, 'plantstore_db_pool_connections')! >= 1);
      assert.deepEqual(sqlite, [], 'no SQLite group-commit metrics on PostgreSQL');
    }
    promtoolCheck(t, text);
  });
});
