import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
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

/** Holds `get` of the plant store (GET /plants/{id}) until the gate opens. */
function holdReads(plants: PlantStore): Gate {
  const get = plants.get.bind(plants);
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const gate: Gate = { waiting: 0, open };
  plants.get = async (id) => {
    gate.waiting += 1;
    await opened;
    gate.waiting -= 1;
    return get(id);
  };
  return gate;
}

/** Holds `findByHash` of the token store (a lookup) until the gate opens. */
function holdLookups(tokens: TokenStore): Gate {
  const findByHash = tokens.findByHash.bind(tokens);
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const gate: Gate = { waiting: 0, open };
  tokens.findByHash = async (hash) => {
    gate.waiting += 1;
    await opened;
    gate.waiting -= 1;
    return findByHash(hash);
  };
  return gate;
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

  test('lookups of unseen tokens past the cap are 503 50303; known tokens are looked up', async (t) => {
    const clock = { now: Date.UTC(2024, 0, 1) };
    const { call, store, newToken } = await setup(t, {
      unseenTokenLookupsMax: 2,
      now: () => clock.now,
      rateLimits: { perToken: null, authFailures: { quota: 5, windowSeconds: 60 } },
    });
    const known = await newToken();
    assert.equal((await call({ ...LIST, token: known })).statusCode, 200);
    const fresh = await newToken();
    // The cache entry of `known` lapses: its next request is looked up again.
    clock.now += 3_000;
    const gate = holdLookups(store.tokens);
    const guesses = [
      call({ ...LIST, token: 'pst_guess1' }),
      call({ ...LIST, token: 'pst_guess2' }),
    ];
    await until(() => gate.waiting === 2, 'two lookups at the gate');

    const busy = await call({ ...LIST, token: 'pst_guess3' });
    assert.equal(busy.statusCode, 503);
    assert.equal(errorOf(busy), 50303);
    assert.equal(busy.headers['retry-after'], '1');
    // A token this process has not seen waits its turn the same way, valid or not...
    assert.equal((await call({ ...LIST, token: fresh })).statusCode, 503);
    // ... and one it has verified is looked up at once, and served.
    const knownAgain = call({ ...LIST, token: known });
    await until(() => gate.waiting === 3, "the known token's lookup at the gate");
    gate.open();
    assert.equal((await knownAgain).statusCode, 200);
    for (const res of await Promise.all(guesses)) assert.equal(res.statusCode, 401);
    // The refused lookups held nothing of the address's failed-authentication limit: two of
    // its five failures are used, by the two guesses that were looked up.
    const next = await call({ ...LIST, token: 'pst_guess4' });
    assert.equal(next.statusCode, 401);
    assert.match(String(next.headers.ratelimit), /r=2;/);
    // With the lookups done, the unseen valid token is served.
    assert.equal((await call({ ...LIST, token: fresh })).statusCode, 200);
  });
});
