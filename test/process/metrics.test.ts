import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { cli, type Server, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// GET /metrics on a listener of its own, from a real process, alone and with --workers.

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
  // Never on the API's port, and nothing else on the metrics port.
  assert.equal((await fetch(`${server.url}/metrics`)).status, 404);
  assert.equal((await fetch(url.replace('/metrics', '/'))).status, 404);
});

test('with --workers, the primary serves the sum of every worker', async (t) => {
  const db = join(makeTempDir(t), 'w.db');
  const token = (await cli(['token', 'create', '--db', db, '--name', 'w'])).stdout.trim();
  const server = await startServer(t, ['--db', db, '--workers', '2', '--metrics-port', '0']);
  const url = await metricsUrl(server);
  await createPlants(server, token, 10);
  const text = await (await fetch(url)).text();
  assert.equal(
    sample(text, 'plantstore_http_requests_total{route="/plants",method="POST",status="201"}'),
    10,
  );
});
