import assert from 'node:assert/strict';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { setImmediate } from 'node:timers/promises';
import pg from 'pg';
import client from 'prom-client';
import { prometheusMetrics } from '../../src/server/metrics.js';
import type { Metrics } from '../../src/core/metrics.js';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { readEvents } from '../helpers/event-stream.js';
import { makeTempDir, setup } from '../helpers/setup.js';

/** The value of one sample in Prometheus' text format, or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('requests are counted by route template, method and status', async (t) => {
  const registry = new client.Registry();
  const { call } = await setup(t, { metrics: prometheusMetrics(registry, { database: 'sqlite' }) });
  assert.equal(
    (await call({ method: 'POST', url: '/plants', json: '{"id":7,"name":"a"}' })).statusCode,
    201,
  );
  assert.equal((await call({ method: 'GET', url: '/plants/7' })).statusCode, 200);
  assert.equal((await call({ method: 'GET', url: '/plants/8' })).statusCode, 404);
  assert.equal((await call({ method: 'GET', url: '/plants/8', token: null })).statusCode, 401);
  assert.equal((await call({ method: 'GET', url: '/wp-login.php' })).statusCode, 404);

  const text = await registry.metrics();
  const requests = (labels: string) => sample(text, `plantstore_http_requests_total{${labels}}`);
  assert.equal(requests('route="/plants",method="POST",status="201"'), 1);
  assert.equal(requests('route="/plants/:id",method="GET",status="200"'), 1);
  assert.equal(requests('route="/plants/:id",method="GET",status="404"'), 1);
  assert.equal(requests('route="/plants/:id",method="GET",status="401"'), 1);
  // A path no route matches is one label, whatever the path.
  assert.equal(requests('route="unmatched",method="GET",status="404"'), 1);
  assert.equal(
    sample(
      text,
      'plantstore_http_request_duration_seconds_count{route="/plants/:id",method="GET"}',
    ),
    3,
  );
  assert.ok(sample(text, 'nodejs_heap_size_used_bytes')! > 0, "the process's own metrics");
  // Prometheus' checker refuses anything but a counter named *_total (prom-client's default
  // nodejs_active_handles_total, a gauge, say); the by-type gauges they sum stay.
  const namedLikeCounters = [...text.matchAll(/^# TYPE (\S+_total) (?!counter$)/gm)];
  assert.deepEqual(
    namedLikeCounters.map((match) => match[1]),
    [],
  );
  assert.match(text, /^# TYPE nodejs_active_handles gauge$/m);
});

test('rate-limit refusals are counted by policy', async (t) => {
  const registry = new client.Registry();
  const { call } = await setup(t, {
    metrics: prometheusMetrics(registry, { database: 'sqlite' }),
    rateLimits: { perToken: { quota: 1, windowSeconds: 60 }, authFailures: null },
    now: () => Date.parse('2026-01-01T00:00:10Z'),
  });
  assert.equal((await call({ method: 'GET', url: '/plants' })).statusCode, 200);
  assert.equal((await call({ method: 'GET', url: '/plants' })).statusCode, 429);
  assert.equal((await call({ method: 'GET', url: '/plants' })).statusCode, 429);
  const text = await registry.metrics();
  assert.equal(sample(text, 'plantstore_rate_limit_refusals_total{policy="token"}'), 2);
});

/** Metrics that remember what the store reported. */
function recording() {
  const statements: string[] = [];
  const commits: number[] = [];
  const metrics: Metrics = {
    request: () => undefined,
    rateLimited: () => undefined,
    statement: (name, seconds, outcome) => {
      assert.ok(seconds >= 0);
      statements.push(`${name}:${outcome}`);
    },
    groupCommit: (writes, seconds) => {
      assert.ok(seconds >= 0);
      commits.push(writes);
    },
    webhookAttempt: () => undefined,
    eventStreams: () => undefined,
    connections: () => undefined,
    closedAtLimit: () => undefined,
  };
  return { metrics, statements, commits };
}

test('SQLite reports each group commit with the writes it carried', async (t) => {
  const { metrics, commits } = recording();
  const store = openSqliteStore({ file: join(makeTempDir(t), 'm.db') }, undefined, metrics);
  t.after(() => store.close());
  await Promise.all(
    Array.from({ length: 20 }, (_, i) => store.plants.insert({ id: BigInt(i), name: 'a' })),
  );
  await store.plants.insert({ id: 100n, name: 'b' });
  assert.deepEqual(commits, [20, 1]);
  assert.equal(store.connections, undefined, 'no pool to report on SQLite');
});

test('PostgreSQL reports statements by name and its pool', { skip: POSTGRES_SKIP }, async (t) => {
  const { metrics, statements } = recording();
  const store = await openPostgresStore({ url: await freshDatabase(t) }, undefined, metrics);
  t.after(() => store.close());
  await store.plants.insert({ id: 1n, name: 'a' });
  await store.plants.get(1n);
  await assert.rejects(store.plants.insert({ id: 1n, name: 'a' }));
  assert.ok(statements.includes('plants.get:ok'), statements.join(' '));
  const state = store.connections!();
  assert.equal(state.max, 10);
  assert.ok(
    state.open >= 1 && state.idle <= state.open && state.waiting === 0,
    JSON.stringify(state),
  );
});

test(
  'PostgreSQL counts a keyed create that lost its key to another as raced',
  { skip: POSTGRES_SKIP },
  async (t) => {
    const { metrics, statements } = recording();
    const url = await freshDatabase(t);
    const store = await openPostgresStore({ url }, undefined, metrics);
    t.after(() => store.close());
    // Another request's key, inserted and not committed yet: the create waits for it at the
    // key's primary key, and fails once it commits.
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    t.after(() => other.end());
    await other.query('BEGIN');
    await other.query(
      `INSERT INTO idempotency_keys (token_id, key, fingerprint, created_at, expires_at,
       lease_until) VALUES (1, 'k', 'f', now(), now() + interval '1 day', now())`,
    );
    const claim = { tokenId: 1, key: 'k', fingerprint: 'f', at: new Date() };
    const create = store.plants.insertWithKey({ name: 'Fern' }, { claim });
    while (!(await waitsForLock(other))) await setImmediate();
    await other.query('COMMIT');
    assert.deepEqual(await create, { state: 'long-way' });
    assert.deepEqual(
      statements.filter((s) => s.startsWith('plants.')),
      ['plants.insertNewNewKey:raced'],
    );
  },
);

/** Whether a backend other than `client`'s waits for a lock. */
async function waitsForLock(client: pg.Client): Promise<boolean> {
  // Inside a transaction the activity view is read once and kept: read it afresh.
  await client.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await client.query<{ waiting: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid()
         AND wait_event_type = 'Lock') AS waiting`,
  );
  return rows[0]!.waiting;
}

test('webhook attempts, their lag and the queue depth', async () => {
  const registry = new client.Registry();
  const metrics = prometheusMetrics(registry, { database: 'sqlite', queueDepth: async () => 7 });
  metrics.webhookAttempt('delivered', 0.04, 0.01);
  metrics.webhookAttempt('retry', 3, 15);
  const text = await registry.metrics();
  assert.equal(sample(text, 'plantstore_webhook_attempts_total{outcome="delivered"}'), 1);
  assert.equal(sample(text, 'plantstore_webhook_attempts_total{outcome="retry"}'), 1);
  assert.equal(sample(text, 'plantstore_webhook_delivery_lag_seconds_bucket{le="0.05"}'), 1);
  assert.equal(sample(text, 'plantstore_webhook_delivery_lag_seconds_count'), 2);
  assert.equal(sample(text, 'plantstore_webhook_queue_depth'), 7);
});

test('event streams and waiting long polls open, as a gauge', async (t) => {
  const registry = new client.Registry();
  const app = await setup(t, { metrics: prometheusMetrics(registry, { database: 'sqlite' }) });
  const base = await app.app.listen({ host: '127.0.0.1', port: 0 });
  const token = await app.newToken(['events:read']);
  const open = async () => sample(await registry.metrics(), 'plantstore_event_streams');
  assert.equal(await open(), 0);
  const streams = [
    await readEvents(t, `${base}/events?after=now`, token),
    await readEvents(t, `${base}/events?after=now`, token),
  ];
  await Promise.all(streams.map((stream) => stream.firstId()));
  assert.equal(await open(), 2);
  streams[0]!.close();
  // Down once the server has seen the connection close.
  while ((await open()) !== 1) await setImmediate();
});

test('connections open, and those closed at --max-connections by reason, as metrics', async (t) => {
  const registry = new client.Registry();
  const metrics = prometheusMetrics(registry, { database: 'sqlite' });
  const app = await setup(t, { metrics, maxConnections: 1 });
  await app.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.app.server.address() as AddressInfo;
  const read = async (name: string) => sample(await registry.metrics(), name);
  const connected = () =>
    new Promise<Socket>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1' }, () => resolve(socket));
      socket.on('error', () => undefined);
      t.after(() => socket.destroy());
    });
  const first = await connected();
  while ((await read('plantstore_http_connections')) !== 1) await setImmediate();
  // At the limit: the first, idle, makes room for the second.
  const firstClosed = new Promise((resolve) => first.once('close', resolve));
  await connected();
  await firstClosed;
  const closed = 'plantstore_http_connections_closed_at_limit_total';
  assert.equal(await read(`${closed}{reason="idle"}`), 1);
  assert.equal(await read('plantstore_http_connections'), 1);
});
