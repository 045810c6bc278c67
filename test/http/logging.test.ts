import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { TestContext } from 'node:test';
import { test } from 'node:test';
import type { InjectOptions } from 'fastify';
import { composeApp } from '../../src/server/compose.js';
import { TokenService } from '../../src/service/token-service.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import type { Store } from '../../src/store/store.js';
import { readEvents } from '../helpers/event-stream.js';
import { until } from '../helpers/until.js';
import { makeTempDir } from '../helpers/setup.js';

// One structured log line per request, and never a credential in the logs.

interface LogLine {
  level: number;
  msg: string;
  reqId: string;
  method: string;
  route: string | null;
  url: string;
  status: number;
  durationMs: number;
  [key: string]: unknown;
}

interface Logged {
  inject(
    options: InjectOptions,
  ): Promise<{ statusCode: number; headers: Record<string, unknown>; body: string }>;
  /** Every line written so far, as text. */
  text(): string;
  /** Every line written so far, parsed. */
  lines(): LogLine[];
  token: string;
  /** The id `token list` shows for `token`. */
  tokenId: number;
  readToken: string;
  /** A token with events:read only. */
  eventsToken: string;
  /** Listens on a free port of 127.0.0.1 and returns it. */
  listen(): Promise<number>;
}

async function loggedApp(
  t: TestContext,
  {
    maxEventStreams,
    wrap = (store) => store,
    ...options
  }: {
    trustProxy?: string;
    maxEventStreams?: number;
    unseenTokenLookups?: { running: number; waiting: number };
    wrap?: (store: Store) => Store;
  } = {},
): Promise<Logged> {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'log.db') });
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const events = maxEventStreams === undefined ? {} : { events: { maxStreams: maxEventStreams } };
  const app = composeApp({
    store: wrap(store),
    logger: { level: 'info', stream },
    ...options,
    ...events,
  });
  t.after(async () => {
    await app.close();
    await store.close();
  });
  await app.ready();
  const tokens = new TokenService(store.tokens);
  const create = (scopes: ('plants:read' | 'plants:write' | 'events:read')[]) =>
    tokens.create({ name: 'log', scopes, expiresInMs: null });
  const { token, record } = await create(['plants:read', 'plants:write']);
  const readToken = (await create(['plants:read'])).token;
  const eventsToken = (await create(['events:read'])).token;
  const text = () => chunks.join('');
  return {
    inject: (options) => app.inject(options),
    text,
    lines: () =>
      text()
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as LogLine),
    token,
    tokenId: record.id,
    readToken,
    eventsToken,
    listen: async () => {
      await app.listen({ host: '127.0.0.1', port: 0 });
      return (app.server.address() as AddressInfo).port;
    },
  };
}

/** Runs one request and returns it with the log lines it added. */
async function logged(
  app: Logged,
  options: InjectOptions,
): Promise<{ res: { statusCode: number; headers: Record<string, unknown> }; added: LogLine[] }> {
  const before = app.lines().length;
  const res = await app.inject(options);
  // pino writes synchronously to the stream given, but let any pending write land.
  await new Promise((resolve) => setImmediate(resolve));
  return { res, added: app.lines().slice(before) };
}

function assertOneLine(
  added: LogLine[],
  res: { statusCode: number; headers: Record<string, unknown> },
  expected: { method: string; route: string | null; url: string; status: number },
): LogLine {
  assert.equal(added.length, 1, `one line, got ${JSON.stringify(added)}`);
  const line = added[0]!;
  assert.equal(line.method, expected.method);
  assert.equal(line.route, expected.route);
  assert.equal(line.url, expected.url);
  assert.equal(line.status, expected.status);
  assert.equal(res.statusCode, expected.status);
  assert.equal(typeof line.durationMs, 'number');
  assert.ok(line.durationMs >= 0 && line.durationMs < 10_000, `durationMs ${line.durationMs}`);
  assert.equal(typeof line.reqId, 'string');
  assert.equal(line.reqId, res.headers['x-request-id']);
  return line;
}

test('a successful request writes exactly one info line with method, route, status, duration and reqId', async (t) => {
  const app = await loggedApp(t);
  const { res, added } = await logged(app, {
    method: 'GET',
    url: '/plants?limit=5',
    headers: { authorization: `Bearer ${app.token}`, 'x-request-id': 'trace-ok-1' },
  });
  const line = assertOneLine(added, res, {
    method: 'GET',
    route: '/plants',
    url: '/plants?limit=5',
    status: 200,
  });
  assert.equal(line.reqId, 'trace-ok-1');
  assert.equal(line.level, 30);
});

test('the route of a parametric path is its template', async (t) => {
  const app = await loggedApp(t);
  const created = await logged(app, {
    method: 'POST',
    url: '/plants',
    headers: { authorization: `Bearer ${app.token}`, 'content-type': 'application/json' },
    payload: '{"id":9223372036854775807,"name":"Fern"}',
  });
  assertOneLine(created.added, created.res, {
    method: 'POST',
    route: '/plants',
    url: '/plants',
    status: 201,
  });
  const deleted = await logged(app, {
    method: 'DELETE',
    url: '/plants/9223372036854775807',
    headers: { authorization: `Bearer ${app.token}` },
  });
  assertOneLine(deleted.added, deleted.res, {
    method: 'DELETE',
    route: '/plants/:id',
    url: '/plants/9223372036854775807',
    status: 204,
  });
});

test('each failing request writes exactly one line too, with its status', async (t) => {
  const app = await loggedApp(t);
  const cases: [InjectOptions, { method: string; route: string | null; status: number }][] = [
    [
      { method: 'GET', url: '/plants' },
      { method: 'GET', route: '/plants', status: 401 },
    ],
    [
      { method: 'GET', url: '/plants', headers: { authorization: 'Bearer pst_wrong' } },
      { method: 'GET', route: '/plants', status: 401 },
    ],
    [
      { method: 'DELETE', url: '/plants/1', headers: { authorization: `Bearer ${app.readToken}` } },
      { method: 'DELETE', route: '/plants/:id', status: 403 },
    ],
    [
      { method: 'GET', url: '/plants/abc', headers: { authorization: `Bearer ${app.token}` } },
      { method: 'GET', route: '/plants/:id', status: 400 },
    ],
    [
      { method: 'GET', url: '/plants/5', headers: { authorization: `Bearer ${app.token}` } },
      { method: 'GET', route: '/plants/:id', status: 404 },
    ],
    [
      { method: 'GET', url: '/nowhere' },
      { method: 'GET', route: null, status: 404 },
    ],
    [
      { method: 'PUT', url: '/plants/1' },
      { method: 'PUT', route: null, status: 405 },
    ],
  ];
  const ids = new Set<string>();
  for (const [options, expected] of cases) {
    const { res, added } = await logged(app, options);
    const line = assertOneLine(added, res, { ...expected, url: String(options.url) });
    ids.add(line.reqId);
  }
  assert.equal(ids.size, cases.length, 'every request has its own id');
});

test('a 503 past the event streams limit is its request line alone, at info', async (t) => {
  const app = await loggedApp(t, { maxEventStreams: 1 });
  const port = await app.listen();
  // Holds the one slot until the app closes.
  await (await readEvents(t, `http://127.0.0.1:${port}/events`, app.eventsToken)).firstId();
  const headers = { authorization: `Bearer ${app.eventsToken}` };
  const refused = await logged(app, { method: 'GET', url: '/events?wait=1s', headers });
  const line = assertOneLine(refused.added, refused.res, {
    method: 'GET',
    route: '/events',
    url: '/events?wait=1s',
    status: 503,
  });
  assert.equal(line.level, 30, 'a stated limit, as a 429 is: no error line, no stack');
});

test('a 503 for lookups of unseen tokens at their limit is its request line alone, at info', async (t) => {
  // One lookup at a time and none in line: while a first one is held, the next is refused.
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let held = 0;
  const app = await loggedApp(t, {
    unseenTokenLookups: { running: 1, waiting: 0 },
    wrap: (store) => {
      const findByHash = store.tokens.findByHash.bind(store.tokens);
      store.tokens.findByHash = async (hash) => {
        held += 1;
        await opened;
        return findByHash(hash);
      };
      return store;
    },
  });
  const first = app.inject({
    method: 'GET',
    url: '/plants',
    headers: { authorization: 'Bearer pst_first' },
  });
  await until(() => held === 1, 'the first lookup held');
  const headers = { authorization: 'Bearer pst_unseen' };
  const refused = await logged(app, { method: 'GET', url: '/plants', headers });
  open();
  assert.equal((await first).statusCode, 401);
  const line = assertOneLine(refused.added, refused.res, {
    method: 'GET',
    route: '/plants',
    url: '/plants',
    status: 503,
  });
  assert.equal(line.level, 30, 'a stated limit, as a 429 is: no error line, no stack');
});

test('neither the token nor the Authorization header ever reaches the logs', async (t) => {
  const app = await loggedApp(t);
  const secret = app.token;
  const requests: InjectOptions[] = [
    { method: 'GET', url: '/plants', headers: { authorization: `Bearer ${secret}` } },
    { method: 'GET', url: '/plants/1', headers: { authorization: `Bearer ${secret}` } },
    { method: 'GET', url: '/plants', headers: { authorization: `Bearer ${secret}x` } },
    { method: 'GET', url: '/plants', headers: { authorization: `Basic ${secret}` } },
    { method: 'GET', url: '/plants', headers: { authorization: `Bearer ${secret} trailing` } },
    { method: 'GET', url: '/nowhere', headers: { authorization: `Bearer ${secret}` } },
    {
      method: 'POST',
      url: '/plants',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      payload: '{"id":',
    },
  ];
  const statuses: number[] = [];
  for (const options of requests) statuses.push((await app.inject(options)).statusCode);
  assert.deepEqual(statuses, [200, 404, 401, 401, 401, 404, 400]);
  const text = app.text();
  assert.equal(app.lines().length, requests.length);
  assert.ok(!text.includes(secret), 'the token is in the logs');
  assert.ok(!text.includes(secret.slice(4)), 'the token body is in the logs');
  assert.doesNotMatch(text, /authorization/i);
  assert.doesNotMatch(text, /bearer/i);
});

test('the line says who: the client address and the id of the token, never the token', async (t) => {
  const app = await loggedApp(t);
  const authenticated = await logged(app, {
    method: 'GET',
    url: '/plants',
    remoteAddress: '198.51.100.23',
    headers: { authorization: `Bearer ${app.token}` },
  });
  const line = assertOneLine(authenticated.added, authenticated.res, {
    method: 'GET',
    route: '/plants',
    url: '/plants',
    status: 200,
  });
  assert.equal(line.client, '198.51.100.23');
  assert.equal(line.tokenId, app.tokenId);

  for (const authorization of [undefined, 'Bearer pst_wrong']) {
    const refused = await logged(app, {
      method: 'GET',
      url: '/plants',
      remoteAddress: '2001:db8::7',
      headers: authorization === undefined ? {} : { authorization },
    });
    const anonymous = assertOneLine(refused.added, refused.res, {
      method: 'GET',
      route: '/plants',
      url: '/plants',
      status: 401,
    });
    assert.equal(anonymous.client, '2001:db8::7');
    assert.equal(anonymous.tokenId, null);
  }
  // A valid token refused for its scope is named too: the operator can find who tried.
  const forbidden = await logged(app, {
    method: 'DELETE',
    url: '/plants/1',
    headers: { authorization: `Bearer ${app.readToken}` },
  });
  const refusedLine = assertOneLine(forbidden.added, forbidden.res, {
    method: 'DELETE',
    route: '/plants/:id',
    url: '/plants/1',
    status: 403,
  });
  assert.equal(typeof refusedLine.tokenId, 'number');
  assert.notEqual(refusedLine.tokenId, app.tokenId);
  const open = await logged(app, { method: 'GET', url: '/healthz' });
  assert.equal(open.added[0]?.tokenId, null);
  assert.equal(open.added[0]?.client, '127.0.0.1');
  assert.ok(!app.text().includes(app.token.slice(4)), 'the token is in the logs');
});

test('behind a trusted proxy the client address is the one X-Forwarded-For gives', async (t) => {
  const app = await loggedApp(t, { trustProxy: '10.0.0.0/8' });
  const viaProxy = await logged(app, {
    method: 'GET',
    url: '/plants',
    remoteAddress: '10.1.2.3',
    headers: { authorization: `Bearer ${app.token}`, 'x-forwarded-for': '203.0.113.9' },
  });
  assert.equal(viaProxy.added[0]?.client, '203.0.113.9');
  assert.equal(viaProxy.added[0]?.tokenId, app.tokenId);
  // From an address not trusted, the header is the client's word only: not believed.
  const direct = await logged(app, {
    method: 'GET',
    url: '/plants',
    remoteAddress: '192.0.2.50',
    headers: { authorization: `Bearer ${app.token}`, 'x-forwarded-for': '203.0.113.9' },
  });
  assert.equal(direct.added[0]?.client, '192.0.2.50');
});

test('a request the HTTP parser refuses is logged with the address it came from', async (t) => {
  const app = await loggedApp(t);
  const port = await app.listen();
  await new Promise<void>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.on('error', reject);
    socket.on('close', () => resolve());
    socket.resume();
    socket.write('GARBAGE\r\n\r\n');
  });
  const line = app.lines().find((entry) => entry.status === 400 && entry.route === null);
  assert.ok(line, app.text());
  assert.equal(line.cause, 'HPE_INVALID_METHOD');
  assert.equal(line.client, '127.0.0.1');
});

test('a request the router cannot decode (bad percent-encoding) still gets its one line', async (t) => {
  const app = await loggedApp(t);
  const { res, added } = await logged(app, {
    method: 'GET',
    url: '/plants/%zz',
    headers: { authorization: `Bearer ${app.token}`, 'x-request-id': 'trace-bad-url' },
  });
  const line = assertOneLine(added, res, {
    method: 'GET',
    route: null,
    url: '/plants/%zz',
    status: 400,
  });
  assert.equal(line.reqId, 'trace-bad-url');
  assert.ok(!app.text().includes(app.token));
});

// Both ways a store fails a read: PostgreSQL's promise rejects, SQLite's read throws at once
// (the route then answers without a promise, see getPlant's route).
const failingReads = {
  rejected: () => Promise.reject(new Error('disk on fire')),
  thrown: () => {
    throw new Error('disk on fire');
  },
};

for (const [how, get] of Object.entries(failingReads)) {
  test(`a line logged through request.log (the lazy child logger, on a 500, ${how}) carries the request id`, async (t) => {
    const logged = await loggedApp(t, {
      wrap: (store) => ({ ...store, plants: { ...store.plants, get } }),
    });
    const res = await logged.inject({
      method: 'GET',
      url: '/plants/1',
      headers: { authorization: `Bearer ${logged.readToken}`, 'x-request-id': 'trace-500' },
    });
    assert.equal(res.statusCode, 500);
    assert.doesNotMatch(res.body, /disk on fire/);
    const lines = logged.lines();
    const failed = lines.find((line) => line.msg === 'request failed');
    assert.ok(failed, JSON.stringify(lines));
    assert.equal(failed.reqId, 'trace-500');
    assert.match(JSON.stringify(failed.err), /disk on fire/);
    assert.equal(lines.filter((line) => line.msg === 'request').length, 1);
  });
}
