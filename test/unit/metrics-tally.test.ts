import assert from 'node:assert/strict';
import { it } from 'node:test';
import client from 'prom-client';
import { prometheusMetrics } from '../../src/server/metrics.js';

// Requests are counted outside prom-client and handed to it at scrape time: the text must be
// what prom-client's own counter and histogram would write, and workers' figures must sum.

const NAME = 'plantstore_http_request_duration_seconds';

function lines(text: string, prefix: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(prefix));
}

it('writes the counter and a cumulative histogram, a bound counting in its own bucket', async () => {
  const registry = new client.Registry();
  const metrics = prometheusMetrics(registry, { database: 'sqlite' });
  for (const seconds of [0.0005, 0.0007, 0.003, 7])
    metrics.request('/plants/:id', 'GET', 200, seconds);
  metrics.request('/plants/:id', 'GET', 404, 0.0001);
  metrics.request('/plants', 'POST', 201, 0.002);
  const text = await registry.metrics();
  assert.match(text, new RegExp(`^# TYPE ${NAME} histogram$`, 'm'));
  assert.deepEqual(lines(text, 'plantstore_http_requests_total{'), [
    'plantstore_http_requests_total{route="/plants/:id",method="GET",status="200"} 4',
    'plantstore_http_requests_total{route="/plants/:id",method="GET",status="404"} 1',
    'plantstore_http_requests_total{route="/plants",method="POST",status="201"} 1',
  ]);
  const get = lines(text, `${NAME}_bucket{`).filter((l) => l.includes('method="GET"'));
  const at = (le: string) => get.find((l) => l.includes(`le="${le}"`))!.split(' ')[1];
  assert.equal(at('0.0005'), '2', '0.0001 and 0.0005 (on the bound)');
  assert.equal(at('0.001'), '3');
  assert.equal(at('0.005'), '4');
  assert.equal(at('5'), '4', '7 s is above every bound');
  assert.equal(at('+Inf'), '5');
  assert.deepEqual(lines(text, `${NAME}_count{route="/plants/:id"`), [
    `${NAME}_count{route="/plants/:id",method="GET"} 5`,
  ]);
  const sum = Number(lines(text, `${NAME}_sum{route="/plants/:id"`)[0]!.split(' ')[1]);
  assert.ok(Math.abs(sum - 7.0043) < 1e-9);
});

it("sums two workers' figures as the cluster's primary does", async () => {
  const workers = [new client.Registry(), new client.Registry()];
  const [a, b] = workers.map((registry) => prometheusMetrics(registry, { database: 'sqlite' }));
  a!.request('/plants', 'GET', 200, 0.001);
  b!.request('/plants', 'GET', 200, 0.02);
  b!.request('/plants', 'GET', 200, 0.02);
  const merged = client.AggregatorRegistry.aggregate(
    await Promise.all(workers.map((registry) => registry.getMetricsAsJSON())),
  );
  const text = await merged.metrics();
  assert.deepEqual(lines(text, 'plantstore_http_requests_total{'), [
    'plantstore_http_requests_total{route="/plants",method="GET",status="200"} 3',
  ]);
  assert.deepEqual(lines(text, `${NAME}_bucket{le="0.001"`), [
    `${NAME}_bucket{le="0.001",route="/plants",method="GET"} 1`,
  ]);
  assert.deepEqual(lines(text, `${NAME}_count`), [`${NAME}_count{route="/plants",method="GET"} 3`]);
});
