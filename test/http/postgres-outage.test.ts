import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { errorCatalogue } from '../../src/core/errors.js';
import { composeApp } from '../../src/server/compose.js';
import { READINESS_TIMEOUT_MS } from '../../src/http/routes/system.js';
import { TokenService } from '../../src/service/token-service.js';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { READ_TIMEOUT_MS } from '../../src/store/postgres/query.js';
import {
  CONNECT_TIMEOUT_MS,
  DEFAULT_POOL_SIZE,
  STATEMENT_TIMEOUT_MS,
} from '../../src/store/postgres/timeouts.js';
import type { Store } from '../../src/store/store.js';
import { OpenApiValidator } from '../helpers/openapi-validator.js';
import { collectCrashes, databaseBehindProxy, POSTGRES_SKIP } from '../helpers/postgres.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';
import { until } from '../helpers/until.js';

/**
 * The longest a request that makes one database call may take while the database is
 * unreachable: at most CONNECT_TIMEOUT_MS waiting for a connection, then at most the
 * store's read timeout (READ_TIMEOUT_MS, the statement timeout and 1 s) for an answer: 8 s.
 */
const OUTAGE_BOUND_MS = CONNECT_TIMEOUT_MS + READ_TIMEOUT_MS;
/** How long the service may take to notice the database is back. */
const RECOVERY_BOUND_MS = 5_000;

interface Harness {
  app: FastifyInstance;
  store: Store;
  proxy: TcpProxy;
  /** A token already used (so cached for up to 2 s, and "last used" recorded). */
  token: string;
  /** Issues a token with both scopes that no request has used yet. */
  newToken(): Promise<string>;
  /** The id of a plant created before the outage. */
  plantId: string;
  /** Injects a request, checks the answer against the served OpenAPI document, times it. */
  call(call: Call): Promise<Timed>;
  /** uncaughtException and unhandledRejection seen while the test ran. */
  crashes: unknown[];
  /** Calls the app has made to the store so far (each one a wait on the database). */
  storeCalls(): number;
}

interface Call {
  method: 'GET' | 'POST';
  url: string;
  token?: string;
  payload?: InjectOptions['payload'];
}

interface Timed {
  res: LightMyRequestResponse;
  ms: number;
  what: string;
}

/** The service on a fresh schema, reaching PostgreSQL only through a TCP proxy. */
async function harness(t: TestContext): Promise<Harness> {
  const crashes = collectCrashes(t);
  const { url, direct, proxy } = await databaseBehindProxy(t);
  assert.equal(
    new URL(url).searchParams.get('options'),
    new URL(direct).searchParams.get('options'),
  );

  const store = await openPostgresStore({ url });
  const storeCalls = countCalls(store);
  const app = composeApp({ store });
  t.after(async () => {
    await app.close();
    // Whatever state the test left the proxy in, the pool's sockets end at once.
    await proxy.close();
    await store.close();
  });
  await app.ready();

  const served = await app.inject({ method: 'GET', url: '/openapi.json' });
  const validator = new OpenApiValidator(JSON.parse(served.body) as Record<string, unknown>);
  const tokens = new TokenService(store.tokens);
  const newToken = async () =>
    (
      await tokens.create({
        name: 'outage',
        scopes: ['plants:read', 'plants:write'],
        expiresInMs: null,
      })
    ).token;

  const call = async ({ method, url, token, payload }: Call): Promise<Timed> => {
    const start = performance.now();
    const res = await app.inject({
      method,
      url,
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      ...(payload !== undefined && { payload }),
    });
    const ms = performance.now() - start;
    validator.check(method, url, res);
    return { res, ms, what: `${method} ${url}` };
  };

  const token = await newToken();
  const created = await call({
    method: 'POST',
    url: '/plants',
    token,
    payload: { name: 'Fern', tag: 'shade' },
  });
  assert.equal(created.res.statusCode, 201, created.res.body);
  const plantId = (created.res.headers.location as string).replace('/plants/', '');
  const read = await call({ method: 'GET', url: `/plants/${plantId}`, token });
  assert.equal(read.res.statusCode, 200, read.res.body);

  return { app, store, proxy, token, newToken, plantId, call, crashes, storeCalls };
}

/** Counts the calls made from now on to the store methods a request waits on. */
function countCalls(store: Store): () => number {
  let calls = 0;
  const count = <T extends object>(target: T, names: (keyof T)[]) => {
    for (const name of names) {
      const method = target[name] as (...args: unknown[]) => unknown;
      target[name] = ((...args: unknown[]) => {
        calls += 1;
        return method.apply(target, args);
      }) as T[keyof T];
    }
  };
  count(store.plants, ['get', 'list', 'insert', 'update', 'delete']);
  count(store.tokens, ['findByHash']);
  count(store, ['ping']);
  return () => calls;
}

/** A 503 with the catalogue's body and Retry-After, answered within `boundMs`. */
function assertUnavailable({ res, ms, what }: Timed, boundMs = OUTAGE_BOUND_MS): void {
  assert.equal(res.statusCode, 503, `${what}: ${res.statusCode} ${res.body}`);
  assert.equal(res.headers['retry-after'], '1', `${what}: Retry-After`);
  assert.match(String(res.headers['content-type']), /^application\/json/, what);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message'], what);
  assert.equal(body.error, errorCatalogue.storeUnavailable.code, what);
  assert.equal(typeof body.message, 'string', what);
  assert.ok(ms < boundMs, `${what} took ${ms.toFixed(0)} ms, over ${boundMs} ms`);
}

/** Polls until GET /plants/{id} is 200 again; returns how long that took. */
async function awaitRecovery(h: Harness, token: string): Promise<number> {
  const start = performance.now();
  for (;;) {
    const { res } = await h.call({ method: 'GET', url: `/plants/${h.plantId}`, token });
    const elapsed = performance.now() - start;
    if (res.statusCode === 200) return elapsed;
    assert.equal(res.statusCode, 503, `while recovering: ${res.statusCode} ${res.body}`);
    assert.ok(elapsed < RECOVERY_BOUND_MS, `not recovered ${elapsed.toFixed(0)} ms after restore`);
    await sleep(100);
  }
}

/** Everything works again: reads, writes, readiness, and a token never verified before. */
async function assertRecovered(h: Harness, label: string): Promise<void> {
  const recoveredMs = await awaitRecovery(h, h.token);
  const ready = await h.call({ method: 'GET', url: '/readyz' });
  assert.equal(ready.res.statusCode, 200, ready.res.body);
  const fresh = await h.newToken();
  const created = await h.call({
    method: 'POST',
    url: '/plants',
    token: fresh,
    payload: { name: 'Ivy' },
  });
  assert.equal(created.res.statusCode, 201, created.res.body);
  const read = await h.call({ method: 'GET', url: `/plants/${h.plantId}`, token: fresh });
  assert.equal(read.res.statusCode, 200, read.res.body);
  assert.deepEqual(JSON.parse(read.res.body), {
    id: Number(h.plantId),
    name: 'Fern',
    tag: 'shade',
  });
  console.log(`# ${label}: recovered ${recoveredMs.toFixed(0)} ms after restore`);
}

/** The requests an outage must answer 503: each needs the database. */
async function outageRequests(h: Harness, fresh: string): Promise<Timed[]> {
  return Promise.all([
    // A token verified a moment ago may still come from the cache; the plant cannot.
    h.call({ method: 'GET', url: `/plants/${h.plantId}`, token: h.token }),
    h.call({ method: 'POST', url: '/plants', token: h.token, payload: { name: 'Moss' } }),
    // A token never verified must be looked up: authentication itself needs the database.
    h.call({ method: 'GET', url: `/plants/${h.plantId}`, token: fresh }),
    h.call({ method: 'POST', url: '/plants', token: fresh, payload: { name: 'Moss' } }),
    h.call({ method: 'GET', url: '/plants?limit=5', token: fresh }),
    h.call({ method: 'GET', url: '/readyz' }),
  ]);
}

const summary = (results: Timed[]) =>
  results.map(({ what, res, ms }) => `${what} ${res.statusCode} ${ms.toFixed(0)}ms`).join('; ');

if (POSTGRES_SKIP) {
  it('postgres outage', { skip: POSTGRES_SKIP }, () => {});
} else {
  describe('postgres outage (through a TCP proxy)', () => {
    it(
      'database cut: 503 at once, then recovery on the same pool',
      { timeout: 30_000 },
      async (t) => {
        const h = await harness(t);

        // Refused: every open connection reset, new ones refused.
        const fresh = await h.newToken();
        await h.proxy.cut();
        assert.equal(h.proxy.connections, 0);
        const acceptedBefore = h.proxy.accepted;
        const results = await outageRequests(h, fresh);
        assert.equal(
          h.proxy.accepted,
          acceptedBefore,
          'no connection got through a refusing proxy',
        );
        console.log(`# cut (refused): ${summary(results)}`);
        // A refused connection fails at once, well before the connect timeout.
        for (const result of results) assertUnavailable(result, CONNECT_TIMEOUT_MS);

        // More failing requests than the pool has connections: a failure must not keep its
        // slot, or the pool would be exhausted when the database comes back.
        const burst = await Promise.all(
          Array.from({ length: 3 * DEFAULT_POOL_SIZE }, (_, i) =>
            h.call({ method: 'GET', url: `/plants/${h.plantId}`, token: i % 2 ? fresh : h.token }),
          ),
        );
        for (const result of burst) assertUnavailable(result, CONNECT_TIMEOUT_MS);

        await h.proxy.restore();
        await assertRecovered(h, 'cut (refused)');

        // Accepted then reset: the host answers, the database does not.
        const fresh2 = await h.newToken();
        await h.proxy.cut({ refuse: false });
        const acceptedBeforeReset = h.proxy.accepted;
        const reset = await outageRequests(h, fresh2);
        assert.ok(h.proxy.accepted > acceptedBeforeReset, 'the pool connected, and was reset');
        assert.equal(h.proxy.connections, 0);
        console.log(`# cut (reset): ${summary(reset)}`);
        for (const result of reset) assertUnavailable(result, CONNECT_TIMEOUT_MS);
        await h.proxy.restore();
        await assertRecovered(h, 'cut (reset)');

        // A cut while queries are in flight fails them at once, not at the query timeout.
        const fresh3 = await h.newToken();
        h.proxy.blackhole();
        const started = performance.now();
        const callsBefore = h.storeCalls();
        const inFlight = outageRequests(h, fresh3);
        // All six wait on the database once the store has been asked four things: the plant
        // (the cached token's read), the insert, the new token (one lookup, however many
        // requests bring it) and the readiness ping.
        await until(() => h.storeCalls() >= callsBefore + 4, 'the four store calls of the six');
        await h.proxy.cut();
        const cutAt = performance.now() - started;
        const cutInFlight = await inFlight;
        console.log(`# cut in flight (at ${cutAt.toFixed(0)} ms): ${summary(cutInFlight)}`);
        for (const result of cutInFlight) assertUnavailable(result, cutAt + 1_000);
        await h.proxy.restore();
        await assertRecovered(h, 'cut in flight');
        // A moment for late failures of the reset connections to surface: nothing marks
        // that there will be none, so this waits rather than orders.
        await sleep(200);
        assert.deepEqual(h.crashes, []);
      },
    );

    it(
      'database blackholed: 503 within the timeouts, then recovery when the partition heals',
      { timeout: 30_000 },
      async (t) => {
        const h = await harness(t);
        // A few connections in the pool, idle: queries sent on them will get no answer.
        const warm = await Promise.all(
          Array.from({ length: 4 }, () =>
            h.call({ method: 'GET', url: `/plants/${h.plantId}`, token: h.token }),
          ),
        );
        for (const { res } of warm) assert.equal(res.statusCode, 200);
        const fresh = await h.newToken();

        h.proxy.blackhole();
        const started = performance.now();
        const [results, burst] = await Promise.all([
          outageRequests(h, fresh),
          // More than the pool holds: some wait for a connection, some open new ones.
          Promise.all(
            Array.from({ length: 2 * DEFAULT_POOL_SIZE }, () =>
              h.call({ method: 'GET', url: `/plants/${h.plantId}`, token: h.token }),
            ),
          ),
        ]);
        const elapsed = performance.now() - started;
        console.log(`# blackhole (${elapsed.toFixed(0)} ms in all): ${summary(results)}`);
        console.log(
          `# blackhole burst: ${burst.map(({ res, ms }) => `${res.statusCode}/${ms.toFixed(0)}`).join(' ')}`,
        );
        for (const result of [...results, ...burst]) assertUnavailable(result);

        // Nothing was reset: the answers came from the timeouts, with the connections open.
        assert.ok(h.proxy.connections > 0, 'the blackhole held connections open');
        const ready = results.find(({ what }) => what === 'GET /readyz')!;
        assert.ok(
          ready.ms >= READINESS_TIMEOUT_MS - 50 && ready.ms < READINESS_TIMEOUT_MS + 1_000,
          `/readyz answered 503 after ${ready.ms.toFixed(0)} ms, not after its ${READINESS_TIMEOUT_MS} ms`,
        );
        const slowest = Math.max(...[...results, ...burst].map(({ ms }) => ms));
        assert.ok(
          slowest >= STATEMENT_TIMEOUT_MS,
          `no request waited for the query timeout (slowest ${slowest.toFixed(0)} ms)`,
        );

        await h.proxy.restore();
        await assertRecovered(h, 'blackhole');
        // The held bytes (late answers to abandoned queries) arrive after the restore; a
        // moment for a failure they cause to surface (nothing marks that none will).
        await sleep(200);
        assert.deepEqual(h.crashes, []);
      },
    );
  });
}
