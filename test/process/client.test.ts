import assert from 'node:assert/strict';
import { realpathSync } from 'node:fs';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createClient, type ClientOptions, type Plant, PlantstoreError } from '@plantstore/client';
import { cli, ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// @plantstore/client against real `plantstore serve` processes: what goes over the wire is
// what a user's program sends and gets.

/** A server on a fresh SQLite database, and a token with both plant scopes. */
async function serverWithToken(t: TestContext, args: string[] = []) {
  const db = join(makeTempDir(t), 'plants.db');
  const { stdout } = await cli(['token', 'create', '--db', db]);
  const server = await startServer(t, ['--db', db, ...args]);
  return { url: server.url, token: stdout.trim() };
}

/** A fetch that records the URL and status of every exchange. */
function recordingFetch() {
  const exchanges: { url: string; status: number }[] = [];
  const fetchFn: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    exchanges.push({ url: String(input), status: response.status });
    return response;
  };
  return { exchanges, fetch: fetchFn };
}

const BIG = 9007199254740993n; // 2^53 + 1: a JS number would read 9007199254740992

test('the client against a running server', async (t) => {
  const { url, token } = await serverWithToken(t);
  const recorder = recordingFetch();
  const options: ClientOptions = { baseUrl: url, token, fetch: recorder.fetch };
  const client = createClient(options);

  await t.test('ids above 2^53 round-trip exact through create, read, update, delete', async () => {
    for (const id of [BIG, 9223372036854775807n, -9223372036854775808n]) {
      const created = await client.plants.create({ id, name: `plant ${id}`, tag: 'exact' });
      assert.deepEqual(created, { id, name: `plant ${id}`, tag: 'exact' });
      assert.equal(typeof created.id, 'bigint');
      assert.deepEqual(await client.plants.get(id), created);
      assert.deepEqual(await client.plants.update(id, { tag: null }), { id, name: `plant ${id}` });
    }
    await client.plants.delete(-9223372036854775808n);
    await assert.rejects(client.plants.get(-9223372036854775808n), { status: 404, code: 40401 });
  });

  await t.test('list follows Link page by page, with exact ids in each link', async () => {
    const ids = [BIG + 10n, BIG + 11n, BIG + 12n, BIG + 13n, BIG + 14n];
    for (const id of ids) await client.plants.create({ id, name: 'paged', tag: 'paged' });
    recorder.exchanges.length = 0;
    const seen: bigint[] = [];
    for await (const plant of client.plants.list({ tag: 'paged', limit: 2 })) seen.push(plant.id);
    assert.deepEqual(seen, ids);
    assert.deepEqual(
      recorder.exchanges.map((e) => new URL(e.url).search),
      [
        '?tag=paged&limit=2',
        `?limit=2&after=${BIG + 11n}&tag=paged`,
        `?limit=2&after=${BIG + 13n}&tag=paged`,
      ],
    );
  });

  await t.test('the generic request is the same operations with status and headers', async () => {
    const page = await client.request('get', '/plants', { query: { tag: 'paged', limit: 1 } });
    assert.equal(page.status, 200);
    assert.deepEqual(page.data, [{ id: BIG + 10n, name: 'paged', tag: 'paged' }]);
    assert.match(page.headers.get('link')!, new RegExp(`after=${BIG + 10n}`));
    const one = await client.request('get', '/plants/{id}', { params: { id: BIG } });
    assert.match(one.headers.get('etag')!, /^"/);
  });

  await t.test('an Idempotency-Key makes a repeated create give the first plant back', async () => {
    const first = await client.request('post', '/plants', {
      body: { name: 'once' },
      idempotencyKey: 'client-test-1',
    });
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const again = await client.request('post', '/plants', {
      body: { name: 'once' },
      idempotencyKey: 'client-test-1',
    });
    assert.deepEqual(again.data, first.data);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    const refused = await client.plants
      .create({ name: 'other' }, { idempotencyKey: 'client-test-1' })
      .catch((e: unknown) => e);
    assert.ok(refused instanceof PlantstoreError);
    assert.equal(refused.code, 42201);
  });

  await t.test('refusals are PlantstoreErrors with the body, status and headers', async () => {
    const exists = await client.plants.create({ id: BIG, name: 'again' }).catch((e: unknown) => e);
    assert.ok(exists instanceof PlantstoreError);
    assert.equal(exists.status, 409);
    assert.deepEqual(exists.body, {
      error: 40901,
      message: `A plant with id ${BIG} already exists.`,
    });
    assert.match(exists.requestId!, /\S/);
    assert.deepEqual(exists.rateLimitPolicy, [
      { policy: 'token', quota: 100000, windowSeconds: 60 },
    ]);
    assert.equal(exists.rateLimit[0]!.policy, 'token');

    const invalid = await client.plants.create({ name: '' }).catch((e: unknown) => e);
    assert.equal((invalid as PlantstoreError).code, 40004);

    const stranger = createClient({ baseUrl: url, token: 'pst_not-a-token' });
    const unknown = await stranger.plants.get(1n).catch((e: unknown) => e);
    assert.ok(unknown instanceof PlantstoreError);
    assert.equal(unknown.status, 401);
    assert.equal(unknown.code, 40101);
    assert.match(unknown.headers.get('www-authenticate')!, /invalid_token/);
    assert.equal(unknown.rateLimit[0]!.policy, 'failed-auth');
  });

  await t.test('the client is the workspace package, the one the server uses', () => {
    // By name, as a user's program and the plants commands import it: the workspace link,
    // its package.json "exports", its dist/.
    const resolved = fileURLToPath(import.meta.resolve('@plantstore/client'));
    assert.equal(resolved, join(realpathSync(join(ROOT, 'packages/client')), 'dist/index.js'));
  });
});

test('with retry, the client waits as Retry-After says and gets through', async (t) => {
  // 2 requests a second: of 5 requests sent at once, at least 3 share a window.
  const { url, token } = await serverWithToken(t, ['--rate-limit', '2/1s']);
  const recorder = recordingFetch();
  const client = createClient({ baseUrl: url, token, fetch: recorder.fetch });
  await client.plants.create({ id: 1n, name: 'limited' });

  const slept: number[] = [];
  const impatient = createClient({
    baseUrl: url,
    token,
    fetch: recorder.fetch,
    retry: { attempts: 2 },
    // Never waits: every attempt meets the same window.
    sleep: async (ms) => {
      slept.push(ms);
    },
  });
  const refusals: PlantstoreError[] = [];
  for (let i = 0; i < 5; i++) {
    await impatient.plants.get(1n).catch((e: unknown) => refusals.push(e as PlantstoreError));
  }
  assert.ok(refusals.length > 0, 'some request met the limit');
  const refusal = refusals[0]!;
  assert.equal(refusal.status, 429);
  assert.equal(refusal.code, 42901);
  assert.equal(refusal.retryAfter, 1);
  assert.deepEqual(refusal.rateLimit, [{ policy: 'token', remaining: 0, resetSeconds: 1 }]);
  assert.deepEqual(refusal.rateLimitPolicy, [{ policy: 'token', quota: 2, windowSeconds: 1 }]);
  assert.ok(slept.length > 0 && slept.every((ms) => ms === 1000), 'asked to wait 1 s');

  // The default sleep really waits for the next window.
  recorder.exchanges.length = 0;
  const patient = createClient({
    baseUrl: url,
    token,
    fetch: recorder.fetch,
    retry: { attempts: 5 },
  });
  const plants: Plant[] = [];
  for (let i = 0; i < 5; i++) plants.push(await patient.plants.get(1n));
  assert.equal(plants.length, 5);
  const statuses = recorder.exchanges.map((e) => e.status);
  assert.ok(statuses.includes(429), `some attempt was refused: ${statuses.join(' ')}`);
  assert.equal(statuses.filter((s) => s === 200).length, 5);
});
