import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { noMetrics } from '../../src/core/metrics.js';
import type { PlantStore, TokenStore } from '../../src/store/store.js';
import { body, type Call, forEachBackend } from '../helpers/setup.js';
import { until } from '../helpers/until.js';

// Requests in flight: per token (429 42903), and lookups of tokens the process has not seen
// (503 50303). The store's reads are held behind a gate the test opens, as a slow or busy
// database would hold them, so that requests are in flight together without sleeping.

interface Gate {
  /** Reads waiting at the gate now. */
  waiting: number;
  open(): void;
}

/** A gate in front of one call of the store: each call waits there until the gate opens. */
function gate<A extends unknown[], R>(
  call: (...args: A) => R,
): { gate: Gate; held: (...args: A) => Promise<Awaited<R>> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const gate: Gate = { waiting: 0, open };
  const held = async (...args: A): Promise<Awaited<R>> => {
    gate.waiting += 1;
    await opened;
    gate.waiting -= 1;
    return await call(...args);
  };
  return { gate, held };
}

/** Holds `get` of the plant store (GET /plants/{id}) until the gate opens. */
function holdReads(plants: PlantStore): Gate {
  const held = gate(plants.get.bind(plants));
  plants.get = held.held;
  return held.gate;
}

/** Holds `findByHash` of the token store (a lookup) until the gate opens. */
function holdLookups(tokens: TokenStore): Gate {
  const held = gate(tokens.findByHash.bind(tokens));
  tokens.findByHash = held.held;
  return held.gate;
}

const GET_ONE: Call = { method: 'GET', url: '/plants/1' };
const LIST: Call = { method: 'GET', url: '/plants' };

const errorOf = (res: { body: string }) => Number(body<{ error: bigint }>(res).error);

forEachBackend(({ setup }) => {
  test('a token with as many requests in flight as it may have gets 429 42903, others do not', async (t) => {
    const { call, store, newToken } = await setup(t, { inFlightPerToken: 2 });
    const created = await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"fern"}' });
    assert.equal(created.statusCode, 201);
    const other = await newToken();
    const gate = holdReads(store.plants);
    const held = [call(GET_ONE), call(GET_ONE)];
    await until(() => gate.waiting === 2, 'two reads at the gate');

    const refused = await call(GET_ONE);
    assert.equal(refused.statusCode, 429);
    assert.equal(errorOf(refused), 42903);
    assert.equal(refused.headers['retry-after'], '1');
    assert.match(body<{ message: string }>(refused).message, /2 requests in flight/);
    // Refused before its rate limit counted it: no RateLimit fields.
    assert.equal(refused.headers.ratelimit, undefined);
    // Only this token is held back: another token's read waits at the gate like any other,
    // and this token's requests that need no held read are refused alike.
    assert.equal((await call({ ...LIST })).statusCode, 429);
    const others = call({ ...GET_ONE, token: other });
    await until(() => gate.waiting === 3, "the other token's read at the gate");

    gate.open();
    for (const res of [...(await Promise.all(held)), await others]) {
      assert.equal(res.statusCode, 200);
    }
    // Every place came back: two at once are in flight again, and a third is refused.
    const again = holdReads(store.plants);
    const second = [call(GET_ONE), call(GET_ONE)];
    await until(() => again.waiting === 2, 'two reads at the gate again');
    assert.equal((await call(GET_ONE)).statusCode, 429);
    again.open();
    for (const res of await Promise.all(second)) assert.equal(res.statusCode, 200);
  });

  test('/metrics counts the refusal under the policy in-flight', async (t) => {
    const refusals: string[] = [];
    const metrics = { ...noMetrics, rateLimited: (policy: string) => void refusals.push(policy) };
    const { call, store } = await setup(t, { inFlightPerToken: 1, metrics });
    const gate = holdReads(store.plants);
    const held = call(GET_ONE);
    await until(() => gate.waiting === 1, 'the read at the gate');
    assert.equal((await call(LIST)).statusCode, 429);
    gate.open();
    await held;
    assert.deepEqual(refusals, ['in-flight']);
  });

  test('a request refused after its token was checked gives its place back', async (t) => {
    const { call, newToken } = await setup(t, { inFlightPerToken: 1 });
    const reader = await newToken(['plants:read']);
    for (let i = 0; i < 5; i++) {
      // 403 (scope), 400 (body), 404 (no such plant): each holds the place while it is answered.
      const denied = await call({ method: 'DELETE', url: '/plants/1', token: reader });
      assert.equal(denied.statusCode, 403);
      const invalid = await call({ method: 'POST', url: '/plants', json: '{"name":5}' });
      assert.equal(invalid.statusCode, 400);
      assert.equal((await call({ method: 'GET', url: '/plants/404' })).statusCode, 404);
    }
  });

  test('a place is kept while the handler runs, though its client hung up', async (t) => {
    const { app, call, store, token } = await setup(t, { inFlightPerToken: 1 });
    const created = await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"fern"}' });
    assert.equal(created.statusCode, 201);
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const gate = holdReads(store.plants);
    // The server's answer to the request closes when its client hangs up.
    const answerClosed = new Promise<void>((resolve) =>
      app.server.once('request', (_request, response) => response.once('close', resolve)),
    );
    const hungUp = httpRequest({
      host: '127.0.0.1',
      port,
      path: '/plants/1',
      headers: { authorization: `Bearer ${token}` },
    });
    hungUp.on('error', () => undefined);
    hungUp.end();
    await until(() => gate.waiting === 1, 'the read at the gate');
    hungUp.destroy();
    await answerClosed;
    // Its read goes on against the database, so its place is still taken (a list, which
    // no gate holds, is refused).
    const refused = await call(LIST);
    assert.equal(refused.statusCode, 429);
    assert.equal(errorOf(refused), 42903);
    gate.open();
    await until(() => gate.waiting === 0, 'the read to end');
    // Given back once the handler is done, a few turns after the read.
    let res = await call(GET_ONE);
    for (let i = 0; res.statusCode === 429 && i < 100; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      res = await call(GET_ONE);
    }
    assert.equal(res.statusCode, 200);
  });

  test('a long poll waiting and an open event stream hold no place', async (t) => {
    const { app, call, newToken } = await setup(t, { inFlightPerToken: 1 });
    const watcher = await newToken(['plants:read', 'plants:write', 'events:read']);
    const list = { ...LIST, token: watcher };
    const poll = call({ method: 'GET', url: '/events?after=now&wait=30s', token: watcher });
    // Until the poll waits, it holds the place (it reads the store); then it holds none.
    let res = await call(list);
    for (let i = 0; res.statusCode === 429 && i < 1000; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      res = await call(list);
    }
    assert.equal(res.statusCode, 200);
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const stream = httpRequest({
      host: '127.0.0.1',
      port,
      path: '/events?after=now',
      headers: { authorization: `Bearer ${watcher}`, accept: 'text/event-stream' },
    });
    stream.on('error', () => undefined);
    t.after(() => stream.destroy());
    const opened = await new Promise<import('node:http').IncomingMessage>((resolve) =>
      stream.once('response', resolve).end(),
    );
    assert.equal(opened.statusCode, 200);
    assert.equal((await call(list)).statusCode, 200);
    const created = await call({
      method: 'POST',
      url: '/plants',
      json: '{"name":"fern"}',
      token: watcher,
    });
    assert.equal(created.statusCode, 201);
    assert.equal((await poll).statusCode, 200);
  });

  test('lookups of unseen tokens run a few at once, then wait in line, then are 503 50303', async (t) => {
    const clock = { now: Date.UTC(2024, 0, 1) };
    const { call, store, newToken } = await setup(t, {
      unseenTokenLookups: { running: 1, waiting: 1 },
      now: () => clock.now,
      rateLimits: { perToken: null, authFailures: { quota: 5, windowSeconds: 60 } },
    });
    const known = await newToken();
    assert.equal((await call({ ...LIST, token: known })).statusCode, 200);
    const fresh = await newToken();
    // The cache entry of `known` lapses: its next request is looked up again.
    clock.now += 3_000;
    const gate = holdLookups(store.tokens);
    const running = call({ ...LIST, token: 'pst_guess1' });
    await until(() => gate.waiting === 1, 'one lookup at the gate');
    const waiting = call({ ...LIST, token: 'pst_guess2' });
    // Its request reaches the line within a turn or two: nothing on the way waits on I/O.
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(gate.waiting, 1, 'the second waits its turn, it does not run');

    const busy = await call({ ...LIST, token: 'pst_guess3' });
    assert.equal(busy.statusCode, 503);
    assert.equal(errorOf(busy), 50303);
    assert.equal(busy.headers['retry-after'], '1');
    // A token this process has not seen is refused the same way, valid or not...
    assert.equal((await call({ ...LIST, token: fresh })).statusCode, 503);
    // ... and one it has verified is looked up at once, and served.
    const knownAgain = call({ ...LIST, token: known });
    await until(() => gate.waiting === 2, "the known token's lookup at the gate");
    gate.open();
    assert.equal((await knownAgain).statusCode, 200);
    // The one in line is looked up once the running one ends.
    assert.equal((await running).statusCode, 401);
    assert.equal((await waiting).statusCode, 401);
    // The refused lookups held nothing of the address's failed-authentication limit: two of
    // its five failures are used, by the two guesses that were looked up.
    const next = await call({ ...LIST, token: 'pst_guess4' });
    assert.equal(next.statusCode, 401);
    assert.match(String(next.headers.ratelimit), /r=2;/);
    // With the lookups done, the unseen valid token is served.
    assert.equal((await call({ ...LIST, token: fresh })).statusCode, 200);
  });

  test('a handler that answers synchronously gives its place back', async (t) => {
    // On SQLite GET /plants/{id} is answered in the handler's own turn, returning no promise.
    const { call } = await setup(t, { inFlightPerToken: 1 });
    const created = await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"fern"}' });
    assert.equal(created.statusCode, 201);
    for (let i = 0; i < 3; i++) assert.equal((await call(GET_ONE)).statusCode, 200);
  });

  test('a token being looked up joins the lookup when the lookups are at their cap', async (t) => {
    const { call, store, newToken } = await setup(t, {
      unseenTokenLookups: { running: 1, waiting: 0 },
    });
    const fresh = await newToken();
    const gate = holdLookups(store.tokens);
    const first = call({ ...LIST, token: fresh });
    await until(() => gate.waiting === 1, 'the lookup at the gate');
    const second = call({ ...LIST, token: fresh });
    gate.open();
    assert.equal((await first).statusCode, 200);
    assert.equal((await second).statusCode, 200);
  });

  test('a connection answered by the HTTP parser (a bad chunk) gives its place back', async (t) => {
    const { app, call, token } = await setup(t, { inFlightPerToken: 1 });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const serverSide = new Promise<Socket>((resolve) => app.server.once('connection', resolve));
    // The client keeps its side open after the answer, as Node lets it.
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    t.after(() => socket.destroy());
    socket.on('error', () => undefined);
    let answer = '';
    socket.on('data', (data: Buffer) => (answer += data.toString()));
    socket.write(
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
        'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"n\r\nZZ\r\n',
    );
    const closed = new Promise<void>(
      (resolve) => void serverSide.then((s) => s.once('close', resolve)),
    );
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('the server kept the connection open')), 10_000);
    });
    await Promise.race([closed, bound]).finally(() => clearTimeout(timer));
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.equal((await call(LIST)).statusCode, 200);
  });

  test('requests whose clients left during their token lookup are not served', async (t) => {
    const clock = { now: Date.UTC(2024, 0, 1) };
    const { app, call, store, token } = await setup(t, {
      inFlightPerToken: 1,
      now: () => clock.now,
    });
    const created = await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"fern"}' });
    assert.equal(created.statusCode, 201);
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    // The token's cache entry lapses: its next requests wait on one lookup.
    clock.now += 3_000;
    const lookups = holdLookups(store.tokens);
    let reads = 0;
    const get = store.plants.get.bind(store.plants);
    store.plants.get = (id) => {
      reads += 1;
      return get(id);
    };
    const N = 5;
    let arrived = 0;
    const gone: Promise<void>[] = [];
    app.server.on('request', (_request, response) => {
      arrived += 1;
      gone.push(new Promise((resolve) => response.once('close', resolve)));
    });
    const clients = Array.from({ length: N }, () => {
      const client = httpRequest({
        host: '127.0.0.1',
        port,
        path: '/plants/1',
        agent: false,
        headers: { authorization: `Bearer ${token}` },
      });
      client.on('error', () => undefined);
      client.end();
      return client;
    });
    await until(() => arrived === N && lookups.waiting === 1, 'the requests on one lookup');
    for (const client of clients) client.destroy();
    await Promise.all(gone);
    lookups.open();
    // A live request of the token, after theirs: it is served, and theirs never read.
    assert.equal((await call(GET_ONE)).statusCode, 200);
    assert.equal(reads, 1, 'only the live request read the plant');
  });

  test('long polls woken by an event read the store again only with a place', async (t) => {
    const K = 6;
    const { call, store, newToken } = await setup(t, { inFlightPerToken: 1 });
    const watcher = await newToken(['plants:read', 'plants:write', 'events:read']);
    const polls: ReturnType<typeof call>[] = [];
    for (let i = 0; i < K; i++) {
      polls.push(call({ method: 'GET', url: '/events?after=now&wait=30s', token: watcher }));
      // Once it waits, its place is free again.
      let res = await call({ ...LIST, token: watcher });
      for (let j = 0; res.statusCode === 429 && j < 1000; j++) {
        await new Promise((resolve) => setImmediate(resolve));
        res = await call({ ...LIST, token: watcher });
      }
      assert.equal(res.statusCode, 200);
    }
    let reading = 0;
    let most = 0;
    const read = store.events.read.bind(store.events);
    store.events.read = async (after, limit) => {
      most = Math.max(most, ++reading);
      try {
        return await read(after, limit);
      } finally {
        reading -= 1;
      }
    };
    const created = await call({ method: 'POST', url: '/plants', json: '{"name":"fern"}' });
    assert.equal(created.statusCode, 201);
    const pages = (await Promise.all(polls)).map((res) => {
      assert.equal(res.statusCode, 200);
      return body<unknown[]>(res).length;
    });
    // One token, one place: one poll reads the event at a time; those that find no place
    // answer their empty page (their next poll finds the event at once).
    assert.equal(most, 1, `${most} reads of the event log at once`);
    assert.ok(pages.includes(1), String(pages));
  });
});
