import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createClient,
  PlantstoreError,
  type ClientOptions,
} from '../../packages/client/src/index.js';
import { recordingClient } from '../helpers/fake-client.js';

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

type Reply = { status: number; body?: string; headers?: Record<string, string> };

/** A client whose fetch answers from `replies` in turn and records what was sent. */
function fake(replies: Reply[], options: Partial<ClientOptions> = {}) {
  const sent: Sent[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit) => {
    sent.push({
      method: init?.method ?? 'GET',
      url: String(input),
      headers: init?.headers as Record<string, string>,
      ...(init?.body !== undefined && { body: init.body as string }),
    });
    const reply = replies.shift() ?? assert.fail('more requests than replies');
    const json = reply.body !== undefined && { 'content-type': 'application/json' };
    return new Response(reply.body ?? null, {
      status: reply.status,
      headers: { ...json, ...reply.headers },
    });
  };
  const { client, slept } = recordingClient(fetch, options);
  return { client, sent, slept };
}

const refusal = (status: number, error: number, headers: Record<string, string> = {}): Reply => ({
  status,
  body: JSON.stringify({ error, message: `refused ${error}` }),
  headers,
});

test('ids go out exact in the path and the body, and come back as bigints', async () => {
  const { client, sent } = fake([
    { status: 201, body: '{"id": 9223372036854775807, "name": "Max"}' },
    { status: 200, body: '{"id": -9007199254740993, "name": "Min"}' },
  ]);
  const created = await client.plants.create({ id: 9223372036854775807n, name: 'Max' });
  assert.deepEqual(created, { id: 9223372036854775807n, name: 'Max' });
  assert.deepEqual(await client.plants.get(-9007199254740993n), {
    id: -9007199254740993n,
    name: 'Min',
  });
  assert.equal(sent[0]!.body, '{"id":9223372036854775807,"name":"Max"}');
  assert.equal(sent[0]!.headers['content-type'], 'application/json');
  assert.equal(sent[0]!.headers.authorization, 'Bearer pst_x');
  assert.equal(sent[0]!.headers['idempotency-key'], undefined);
  assert.equal(sent[1]!.url, 'http://plants.test:8080/plants/-9007199254740993');
});

test('an update is a merge patch; a delete has no body; the query is encoded', async () => {
  const { client, sent } = fake([
    { status: 200, body: '{"id": 1, "name": "a"}' },
    { status: 204 },
    { status: 200, body: '[]' },
  ]);
  await client.plants.update(1n, { tag: null }, { ifMatch: '"e1"' });
  assert.equal(await client.plants.delete(1n), undefined);
  for await (const plant of client.plants.list({ tag: 'a b&c', after: 9007199254740993n })) {
    assert.fail(`no plant expected, got ${plant.id}`);
  }
  assert.equal(sent[0]!.headers['content-type'], 'application/merge-patch+json');
  assert.equal(sent[0]!.headers['if-match'], '"e1"');
  assert.equal(sent[0]!.body, '{"tag":null}');
  assert.equal(sent[1]!.method, 'DELETE');
  assert.equal(sent[1]!.body, undefined);
  assert.equal(sent[2]!.url, 'http://plants.test:8080/plants?tag=a%20b%26c&after=9007199254740993');
});

test('list follows Link rel="next" to the last page, on the same server only', async () => {
  const { client, sent } = fake([
    {
      status: 200,
      body: '[{"id": 9007199254740993, "name": "a"}]',
      headers: { link: '</plants?limit=1&after=9007199254740993>; rel="next"' },
    },
    { status: 200, body: '[{"id": 9007199254740995, "name": "b"}]' },
  ]);
  const ids = [];
  for await (const plant of client.plants.list({ limit: 1 })) ids.push(plant.id);
  assert.deepEqual(ids, [9007199254740993n, 9007199254740995n]);
  assert.equal(sent[1]!.url, 'http://plants.test:8080/plants?limit=1&after=9007199254740993');
  assert.equal(sent[1]!.headers.authorization, 'Bearer pst_x');

  const elsewhere = fake([
    { status: 200, body: '[]', headers: { link: '<http://evil.test/plants>; rel="next"' } },
  ]);
  await assert.rejects(async () => {
    for await (const plant of elsewhere.client.plants.list()) void plant;
  }, /another server: http:\/\/evil\.test/);
  assert.equal(elsewhere.sent.length, 1, 'the token never goes to the other server');
});

test('an error answer is a PlantstoreError, not retried unless asked', async () => {
  const { client, sent } = fake([refusal(429, 42901, { 'retry-after': '3' })]);
  const error = await client.plants.get(1n).catch((e: unknown) => e);
  assert.ok(error instanceof PlantstoreError);
  assert.equal(error.status, 429);
  assert.equal(error.code, 42901);
  assert.equal(error.retryAfter, 3);
  assert.equal(sent.length, 1);
});

test('with retry, 429 and 503 are sent again after Retry-After', async () => {
  const { client, slept, sent } = fake(
    [
      refusal(429, 42901, { 'retry-after': '3' }),
      refusal(503, 50301, { 'retry-after': '1' }),
      { status: 200, body: '{"id": 1, "name": "a"}' },
    ],
    { retry: { attempts: 3 } },
  );
  assert.deepEqual(await client.plants.get(1n), { id: 1n, name: 'a' });
  assert.deepEqual(slept, [3000, 1000]);
  assert.equal(sent.length, 3);
});

test('retries stop after the attempts asked for, and at a wait longer than allowed', async () => {
  const tooMany = fake([refusal(503, 50301), refusal(503, 50301)], { retry: { attempts: 2 } });
  await assert.rejects(tooMany.client.plants.get(1n), (e) => (e as PlantstoreError).status === 503);
  assert.deepEqual(tooMany.slept, [1000], 'without Retry-After: a backoff');

  const tooLong = fake([refusal(429, 42901, { 'retry-after': '61' })], {
    retry: { attempts: 5 },
  });
  await assert.rejects(tooLong.client.plants.get(1n), (e) => (e as PlantstoreError).code === 42901);
  assert.deepEqual(tooLong.slept, []);

  const notRetryable = fake([refusal(404, 40401)], { retry: { attempts: 5 } });
  await assert.rejects(notRetryable.client.plants.get(1n), /40401/);
});

test('a create is retried after 503 only with an Idempotency-Key, which retry makes up', async () => {
  const plain = fake([refusal(503, 50301, { 'retry-after': '1' })]);
  await assert.rejects(
    plain.client.request('post', '/plants', { body: { name: 'a' }, retry: { attempts: 3 } }),
    /50301/,
  );
  assert.equal(plain.sent.length, 1, 'the first attempt may have created the plant');

  const keyed = fake(
    [
      refusal(503, 50301, { 'retry-after': '1' }),
      refusal(409, 40903, { 'retry-after': '1' }),
      { status: 201, body: '{"id": 7, "name": "a"}', headers: { 'idempotent-replayed': 'true' } },
    ],
    { retry: { attempts: 3 } },
  );
  assert.deepEqual(await keyed.client.plants.create({ name: 'a' }), { id: 7n, name: 'a' });
  const keys = keyed.sent.map((s) => s.headers['idempotency-key']);
  assert.match(keys[0]!, /^"[0-9a-f-]{36}"$/);
  assert.deepEqual(keys, [keys[0], keys[0], keys[0]], 'the same key on every attempt');
});

test('an Idempotency-Key is sent as a structured-field string', async () => {
  const { client, sent } = fake([{ status: 201, body: '{"id": 1, "name": "a"}' }]);
  await client.plants.create({ name: 'a' }, { idempotencyKey: 'a "quoted" \\ key' });
  assert.equal(sent[0]!.headers['idempotency-key'], '"a \\"quoted\\" \\\\ key"');
});

test('the generic request is typed from the document and returns status and headers', async () => {
  const { client } = fake([
    { status: 200, body: '{"status": "ok"}', headers: { 'x-request-id': 'r1' } },
    { status: 200, body: '<html></html>', headers: { 'content-type': 'text/html' } },
  ]);
  const health = await client.request('get', '/healthz');
  assert.equal(health.status, 200);
  assert.deepEqual(health.data, { status: 'ok' });
  assert.equal(health.headers.get('x-request-id'), 'r1');
  assert.equal((await client.request('get', '/docs')).data, '<html></html>');
});

test('events after now: asks for now once, then resumes where the server said it stood', async () => {
  const stop = new AbortController();
  const opening = ': plantstore events\nid: 41\n\n';
  const event = 'id: 42\nevent: plant.created\ndata: {"id":9223372036854775807,"name":"Fern"}\n\n';
  const stream = fake([
    // Opened from now at 41, then cut before any event; resumed after 41, an event comes.
    { status: 200, body: opening, headers: { 'content-type': 'text/event-stream' } },
    { status: 200, body: `: plantstore events\nid: 41\n\n${event}` },
  ]);
  const feed = stream.client.events({ after: 'now', signal: stop.signal, backoffMs: 1 });
  const first = await feed.next();
  assert.deepEqual(first.value, {
    position: 42n,
    type: 'plant.created',
    data: { id: 9223372036854775807n, name: 'Fern' },
  });
  stop.abort();
  assert.equal(new URL(stream.sent[0]!.url).searchParams.get('after'), 'now');
  assert.equal(stream.sent[0]!.headers['last-event-id'], undefined);
  assert.equal(new URL(stream.sent[1]!.url).searchParams.get('after'), null);
  assert.equal(stream.sent[1]!.headers['last-event-id'], '41');

  const pages = fake([
    // An empty page from now whose Link says 41, then the server is unavailable a moment.
    {
      status: 200,
      body: '[]',
      headers: { link: '</events?after=41&limit=1000&wait=30s>; rel="next"' },
    },
    refusal(503, 50301, { 'retry-after': '1' }),
    {
      status: 200,
      body: '[{"position":42,"type":"plant.created","at":"2030-01-01T00:00:00.000Z","data":{"id":7,"name":"Aloe"}}]',
      headers: { link: '</events?after=42&limit=1000&wait=30s>; rel="next"' },
    },
  ]);
  const stopPolling = new AbortController();
  const polled = pages.client.events({ after: 'now', mode: 'poll', signal: stopPolling.signal });
  const got = await polled.next();
  stopPolling.abort();
  assert.equal((got.value as { position: bigint }).position, 42n);
  assert.deepEqual(
    pages.sent.map((sent) => new URL(sent.url).searchParams.get('after')),
    ['now', '41', '41'],
  );
});

// Compile-time checks: `npm run typecheck` fails if the generated types stop holding.
export function typeChecks(client: ReturnType<typeof createClient>): void {
  void (async () => {
    const plant = await client.plants.get(1n);
    const id: bigint = plant.id;
    void id;
    // @ts-expect-error an id is a bigint, never a number
    await client.plants.get(1);
    // @ts-expect-error the path parameter is required
    await client.request('get', '/plants/{id}');
    // @ts-expect-error a created plant needs a name
    await client.plants.create({ id: 1n });
    // @ts-expect-error not an operation of the document
    await client.request('put', '/plants/{id}', { params: { id: 1n } });
    const page = await client.request('get', '/plants', { query: { after: 2n, limit: 5 } });
    const ids: bigint[] = page.data.map((p) => p.id);
    void ids;
  });
}

test('a 304 to If-None-Match is a PlantstoreError of status 304: the plant is as you have it', async () => {
  const { client, sent } = fake([{ status: 304, headers: { etag: '"a1"' } }]);
  const asked = client.request('get', '/plants/{id}', {
    params: { id: 7n },
    headers: { 'if-none-match': '"a1"' },
  });
  const error = await asked.then(
    () => assert.fail('a 304 has no plant to answer with'),
    (thrown: unknown) => thrown,
  );
  assert.ok(error instanceof PlantstoreError);
  assert.equal(error.status, 304);
  assert.equal(error.headers.get('etag'), '"a1"');
  assert.equal(sent[0]!.headers['if-none-match'], '"a1"');
});
