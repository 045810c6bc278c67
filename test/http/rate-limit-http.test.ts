import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { parseList } from 'structured-headers';
import type { RateLimitOptions } from '../../src/core/rate-limit.js';
import type { ComposeOptions } from '../../src/server/compose.js';
import { StoreUnavailableError, type TokenStore } from '../../src/store/store.js';
import { body, type Call, forEachBackend, type Setup, setup } from '../helpers/setup.js';

// Rate limits at the HTTP boundary, through `call()` (every answer is also checked against
// the served OpenAPI document), on a clock the test moves.

/** 2024-01-01T00:00:15Z: 45 s before the end of a 60 s window. */
const T0 = Date.UTC(2024, 0, 1) + 15_000;

interface Answer {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

/** A RateLimit or RateLimit-Policy field, parsed as a Structured Field List. */
function field(res: Answer, name: string): { policy: unknown; params: Record<string, unknown> } {
  const value = res.headers[name];
  assert.equal(typeof value, 'string', `${name} is missing`);
  const list = parseList(value as string);
  assert.equal(list.length, 1, `${name}: one item`);
  const [policy, params] = list[0] as [unknown, Map<string, unknown>];
  return { policy, params: Object.fromEntries(params) };
}

function assertNoRateLimitFields(res: Answer, what: string): void {
  assert.equal(res.headers.ratelimit, undefined, what);
  assert.equal(res.headers['ratelimit-policy'], undefined, what);
}

/** `setup` with these limits, on a clock the test moves (`clock.now`, from T0). */
const limitedOn =
  (setup: Setup) =>
  async (
    t: TestContext,
    rateLimits: RateLimitOptions,
    options: Omit<ComposeOptions, 'store' | 'rateLimits' | 'now'> = {},
  ) => {
    const clock = { now: T0 };
    const ctx = await setup(t, { ...options, rateLimits, now: () => clock.now });
    return { ...ctx, clock };
  };

const LIST: Call = { method: 'GET', url: '/plants' };
const TOKENS_3 = { perToken: { quota: 3, windowSeconds: 60 }, authFailures: null };
const FAILURES_3 = { perToken: null, authFailures: { quota: 3, windowSeconds: 60 } };

/**
 * Token lookups held until the test lets them go (as a slow database would hold them), so
 * requests that need one are all in flight together; `count` is the lookups begun.
 */
function holdLookups(tokens: TokenStore) {
  const findByHash = tokens.findByHash.bind(tokens);
  let open!: (outcome: 'answer' | 'fail') => void;
  const gate = new Promise<'answer' | 'fail'>((resolve) => (open = resolve));
  const held = { count: 0, open, onLookup: () => {} };
  tokens.findByHash = async (hash) => {
    held.count += 1;
    held.onLookup();
    if ((await gate) === 'fail') throw new StoreUnavailableError(new Error('connection lost'));
    return findByHash(hash);
  };
  return held;
}

/**
 * Sends the calls at once; `quiet` resolves when each has either been answered or is
 * waiting on a held lookup, so the test knows every request has been decided on.
 */
function burst(
  send: (call: Call) => Promise<Answer>,
  calls: Call[],
  held: { count: number; onLookup: () => void },
) {
  let answered = 0;
  let resolveQuiet!: () => void;
  const quiet = new Promise<void>((resolve) => (resolveQuiet = resolve));
  const check = () => {
    if (answered + held.count >= calls.length) resolveQuiet();
  };
  held.onLookup = check;
  const answers = calls.map((call) =>
    send(call).then((res) => {
      answered += 1;
      check();
      return res;
    }),
  );
  return { quiet, answers: Promise.all(answers) };
}

const statuses = (answers: Answer[]) =>
  answers.map((res) =>
    res.statusCode === 429 ? `429 ${body<{ error: bigint }>(res).error}` : String(res.statusCode),
  );

forEachBackend(({ setup }) => {
  const limited = limitedOn(setup);

  test('by default, answers to a token carry the token policy, 100000 a minute', async (t) => {
    const { call } = await setup(t);
    const res = await call(LIST);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(field(res, 'ratelimit-policy'), {
      policy: 'token',
      params: { q: 100_000, w: 60 },
    });
    const limit = field(res, 'ratelimit');
    assert.equal(limit.policy, 'token');
    assert.equal(limit.params.r, 99_999);
    assert.ok(Number(limit.params.t) >= 1 && Number(limit.params.t) <= 60, String(limit.params.t));
    const failed = await call({ ...LIST, token: 'pst_wrong' });
    assert.equal(failed.statusCode, 401);
    assert.deepEqual(field(failed, 'ratelimit-policy'), {
      policy: 'failed-auth',
      params: { q: 100, w: 60 },
    });
    assert.equal(field(failed, 'ratelimit').params.r, 99);
  });

  test('operational endpoints are not limited and carry no rate-limit fields', async (t) => {
    const { call } = await limited(t, {
      perToken: { quota: 1, windowSeconds: 60 },
      authFailures: { quota: 1, windowSeconds: 60 },
    });
    for (let i = 0; i < 3; i++) {
      for (const url of ['/healthz', '/readyz', '/openapi.json']) {
        const res = await call({ method: 'GET', url, token: i === 0 ? null : 'pst_wrong' });
        assert.equal(res.statusCode, 200, url);
        assertNoRateLimitFields(res, url);
      }
    }
  });

  test('a token over its limit is 429 42901 with Retry-After, RateLimit and RateLimit-Policy', async (t) => {
    const { call } = await limited(t, TOKENS_3);
    const remaining = [];
    for (let i = 0; i < 3; i++) {
      const res = await call(LIST);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(field(res, 'ratelimit-policy'), {
        policy: 'token',
        params: { q: 3, w: 60 },
      });
      assert.deepEqual(field(res, 'ratelimit').params.t, 45);
      remaining.push(field(res, 'ratelimit').params.r);
      assert.equal(res.headers['retry-after'], undefined);
    }
    assert.deepEqual(remaining, [2, 1, 0]);
    const res = await call(LIST);
    assert.equal(res.statusCode, 429);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.deepEqual(body(res), {
      error: 42901n,
      message: 'This access token has used up its rate limit of 3 per 60 s; retry in 45 s.',
    });
    assert.equal(res.headers['retry-after'], '45');
    assert.deepEqual(field(res, 'ratelimit'), { policy: 'token', params: { r: 0, t: 45 } });
    assert.deepEqual(field(res, 'ratelimit-policy'), { policy: 'token', params: { q: 3, w: 60 } });
    assert.equal(res.headers['www-authenticate'], undefined);
  });

  test('Retry-After and t count down to the end of the window; the next window starts afresh', async (t) => {
    const { call, clock } = await limited(t, TOKENS_3);
    for (let i = 0; i < 3; i++) await call(LIST);
    clock.now += 44_500; // 0.5 s before the window ends
    const late = await call(LIST);
    assert.equal(late.statusCode, 429);
    assert.equal(late.headers['retry-after'], '1');
    assert.equal(field(late, 'ratelimit').params.t, 1);
    clock.now += 500;
    const next = await call(LIST);
    assert.equal(next.statusCode, 200);
    assert.deepEqual(field(next, 'ratelimit').params, { r: 2, t: 60 });
  });

  test('each token has a limit of its own', async (t) => {
    const { call, newToken } = await limited(t, TOKENS_3);
    const other = await newToken();
    for (let i = 0; i < 3; i++) await call(LIST);
    assert.equal((await call(LIST)).statusCode, 429);
    const res = await call({ ...LIST, token: other });
    assert.equal(res.statusCode, 200);
    assert.equal(field(res, 'ratelimit').params.r, 2);
  });

  test('every request with a valid token counts, whatever its answer, and reports it', async (t) => {
    const { call, newToken } = await limited(t, TOKENS_3);
    const reader = await newToken(['plants:read']);
    const answers = [
      await call({ method: 'GET', url: '/plants/42', token: reader }), // 404
      await call({ method: 'GET', url: '/plants/abc', token: reader }), // 400
      await call({ method: 'DELETE', url: '/plants/1', token: reader }), // 403
    ];
    assert.deepEqual(
      answers.map((res) => [res.statusCode, field(res, 'ratelimit').params.r]),
      [
        [404, 2],
        [400, 1],
        [403, 0],
      ],
    );
    // The limit comes before the scope: the read-only token on DELETE is now 429, not 403.
    const res = await call({ method: 'DELETE', url: '/plants/1', token: reader });
    assert.equal(res.statusCode, 429);
    assert.equal(body<{ error: bigint }>(res).error, 42901n);
  });

  test('failed authentications count per address: 401s report them, then 429 42902', async (t) => {
    const { call } = await limited(t, FAILURES_3);
    const failures = [
      await call({ ...LIST, token: null }),
      await call({ ...LIST, token: 'pst_wrong' }),
      await call({ method: 'DELETE', url: '/plants/abc', token: 'pst_wrong' }),
    ];
    assert.deepEqual(
      failures.map((res) => [res.statusCode, field(res, 'ratelimit').params.r]),
      [
        [401, 2],
        [401, 1],
        [401, 0],
      ],
    );
    assert.deepEqual(field(failures[0]!, 'ratelimit-policy'), {
      policy: 'failed-auth',
      params: { q: 3, w: 60 },
    });
    for (const token of [null, 'pst_wrong']) {
      const res = await call({ ...LIST, token });
      assert.equal(res.statusCode, 429, String(token));
      assert.deepEqual(body(res), {
        error: 42902n,
        message:
          'Too many failed authentications from this client address: 3 per 60 s; retry in 45 s.',
      });
      assert.equal(res.headers['retry-after'], '45');
      assert.deepEqual(field(res, 'ratelimit'), { policy: 'failed-auth', params: { r: 0, t: 45 } });
      assert.equal(res.headers['www-authenticate'], undefined);
    }
  });

  test('an address over its limit is refused before any token lookup', async (t) => {
    const { call, store } = await limited(t, FAILURES_3);
    let lookups = 0;
    const findByHash = store.tokens.findByHash.bind(store.tokens);
    store.tokens.findByHash = (hash) => {
      lookups += 1;
      return findByHash(hash);
    };
    for (let i = 0; i < 3; i++) await call({ ...LIST, token: `pst_guess${i}` });
    assert.equal(lookups, 3);
    for (let i = 3; i < 20; i++) {
      assert.equal((await call({ ...LIST, token: `pst_guess${i}` })).statusCode, 429);
    }
    assert.equal(lookups, 3, 'no lookup once the address is over its limit');
  });

  test('failed authentications in flight together: only the limit are looked up, the rest are 429 42902', async (t) => {
    const { call, store } = await limited(t, FAILURES_3);
    const held = holdLookups(store.tokens);
    const guesses = Array.from({ length: 20 }, (_, i) => ({ ...LIST, token: `pst_guess${i}` }));
    const { quiet, answers } = burst(call, guesses, held);
    await quiet;
    assert.equal(held.count, 3, 'a lookup for each failure the limit allows, no more');
    held.open('answer');
    const answered = await answers;
    assert.deepEqual(statuses(answered), [
      ...Array<string>(3).fill('401'),
      ...Array<string>(17).fill('429 42902'),
    ]);
    for (const res of answered.slice(3)) assert.equal(res.headers['retry-after'], '45');
    // Each 401 reports what was left when it was answered, the checks still in flight
    // counting as failures: nothing.
    assert.deepEqual(
      answered.slice(0, 3).map((res) => field(res, 'ratelimit').params),
      Array(3).fill({ r: 0, t: 45 }),
    );
    assert.equal((await call({ ...LIST, token: 'pst_late' })).statusCode, 429);
    assert.equal(held.count, 3);
  });

  test('a valid token checked in the same burst is not counted as a failure once it succeeds', async (t) => {
    const { call, store, token } = await limited(t, FAILURES_3);
    const held = holdLookups(store.tokens);
    const calls = [
      { ...LIST, token }, // valid, but not yet verified by the server: it holds a slot too
      ...Array.from({ length: 4 }, (_, i) => ({ ...LIST, token: `pst_guess${i}` })),
    ];
    const { quiet, answers } = burst(call, calls, held);
    await quiet;
    assert.equal(held.count, 3);
    held.open('answer');
    assert.deepEqual(statuses(await answers), ['200', '401', '401', '429 42902', '429 42902']);
    // Two failures so far: the valid token's slot was given back, so one more 401, then 429.
    const third = await call({ ...LIST, token: 'pst_guess9' });
    assert.equal(third.statusCode, 401);
    assert.equal(field(third, 'ratelimit').params.r, 0);
    assert.equal((await call({ ...LIST, token: 'pst_guess10' })).statusCode, 429);
    assert.equal((await call({ ...LIST, token })).statusCode, 200, 'now verified, still served');
  });

  test('a lookup the database fails frees its slot: a 503 is no failed authentication', async (t) => {
    const { call, store } = await limited(t, FAILURES_3);
    const held = holdLookups(store.tokens);
    const guesses = Array.from({ length: 5 }, (_, i) => ({ ...LIST, token: `pst_guess${i}` }));
    const { quiet, answers } = burst(call, guesses, held);
    await quiet;
    held.open('fail');
    assert.deepEqual(statuses(await answers), ['503', '503', '503', '429 42902', '429 42902']);
    store.tokens.findByHash = async () => undefined;
    const after = [];
    for (let i = 0; i < 4; i++) after.push(await call({ ...LIST, token: `pst_next${i}` }));
    assert.deepEqual(statuses(after), ['401', '401', '401', '429 42902']);
  });

  test('a blocked address keeps being served for tokens this server has verified, not others', async (t) => {
    const { call, newToken, token } = await limited(t, FAILURES_3);
    assert.equal((await call(LIST)).statusCode, 200); // `token` is now verified
    const unseen = await newToken();
    for (let i = 0; i < 3; i++) await call({ ...LIST, token: 'pst_wrong' });
    assert.equal((await call({ ...LIST, token: 'pst_wrong' })).statusCode, 429);
    assert.equal((await call({ ...LIST, token })).statusCode, 200);
    const refused = await call({ ...LIST, token: unseen });
    assert.equal(refused.statusCode, 429);
    assert.equal(body<{ error: bigint }>(refused).error, 42902n);
  });

  test('the failed-authentication window ends, and the address is served again', async (t) => {
    const { call, clock } = await limited(t, FAILURES_3);
    for (let i = 0; i < 3; i++) await call({ ...LIST, token: 'pst_wrong' });
    assert.equal((await call({ ...LIST, token: null })).statusCode, 429);
    clock.now += 45_000;
    const res = await call({ ...LIST, token: null });
    assert.equal(res.statusCode, 401);
    assert.deepEqual(field(res, 'ratelimit').params, { r: 2, t: 60 });
    assert.equal((await call(LIST)).statusCode, 200);
  });

  test('other addresses keep their own failed-authentication budget; an IPv6 /64 is one', async (t) => {
    const { call } = await limited(t, FAILURES_3);
    const from = (remoteAddress: string) => call({ ...LIST, token: 'pst_wrong', remoteAddress });
    for (let i = 0; i < 3; i++) await from('192.0.2.1');
    assert.equal((await from('192.0.2.1')).statusCode, 429);
    assert.equal((await from('192.0.2.2')).statusCode, 401);
    await from('2001:db8:0:1::1');
    await from('2001:db8:0:1::2');
    await from('2001:db8:0:1:ffff::3');
    assert.equal((await from('2001:db8:0:1::4')).statusCode, 429, 'same /64');
    assert.equal((await from('2001:db8:0:2::1')).statusCode, 401, 'another /64');
  });

  test('X-Forwarded-For is ignored unless the connection comes from a trusted proxy', async (t) => {
    const { call } = await limited(t, FAILURES_3);
    const via = (forwardedFor: string) =>
      call({ ...LIST, token: 'pst_wrong', headers: { 'x-forwarded-for': forwardedFor } });
    for (let i = 0; i < 3; i++) await via(`203.0.113.${i}`);
    assert.equal((await via('203.0.113.99')).statusCode, 429, 'all one address: 127.0.0.1');
  });

  test('--trust-proxy: the client address comes from X-Forwarded-For sent by the proxy', async (t) => {
    const { call } = await limited(t, FAILURES_3, { trustProxy: '127.0.0.1' });
    const via = (forwardedFor: string, remoteAddress = '127.0.0.1') =>
      call({
        ...LIST,
        token: 'pst_wrong',
        remoteAddress,
        headers: { 'x-forwarded-for': forwardedFor },
      });
    for (let i = 0; i < 3; i++) await via('203.0.113.1');
    assert.equal((await via('203.0.113.1')).statusCode, 429);
    assert.equal((await via('203.0.113.2')).statusCode, 401, 'another client behind the proxy');
    // A client spoofing the header itself, from an address that is not a trusted proxy.
    for (let i = 0; i < 3; i++) await via(`198.51.100.${i}`, '192.0.2.50');
    assert.equal((await via('198.51.100.99', '192.0.2.50')).statusCode, 429);
  });

  test('--rate-limit off: no token limit and no token fields', async (t) => {
    const { call } = await limited(t, FAILURES_3);
    for (let i = 0; i < 10; i++) {
      const res = await call(LIST);
      assert.equal(res.statusCode, 200);
      assertNoRateLimitFields(res, `request ${i}`);
    }
  });

  test('--auth-failure-limit off: failures are never 429 and 401s carry no fields', async (t) => {
    const { call } = await limited(t, TOKENS_3);
    for (let i = 0; i < 10; i++) {
      const res = await call({ ...LIST, token: 'pst_wrong' });
      assert.equal(res.statusCode, 401);
      assertNoRateLimitFields(res, `failure ${i}`);
    }
  });

  test('both off: nothing is limited and no answer carries a field', async (t) => {
    const { call } = await limited(t, { perToken: null, authFailures: null });
    for (let i = 0; i < 10; i++) {
      assertNoRateLimitFields(await call(LIST), 'ok');
      const failed = await call({ ...LIST, token: null });
      assert.equal(failed.statusCode, 401);
      assertNoRateLimitFields(failed, 'failed');
    }
  });
});

test('the OpenAPI document: 429 on every operation that takes a token, with the three fields', async (t) => {
  const { app } = await setup(t);
  const doc = JSON.parse((await app.inject({ method: 'GET', url: '/openapi.json' })).body) as {
    paths: Record<string, Record<string, { security: unknown[]; responses: Record<string, Json> }>>;
    components: { headers: Record<string, Json> };
  };
  type Json = { headers?: Record<string, { $ref: string }>; description?: string };
  // The names of the headers an answer declares (a component each, or described in place).
  const refs = (response: Json | undefined) => Object.keys(response?.headers ?? {});
  let limited = 0;
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const what = `${method} ${path}`;
      if (op.security.length === 0) {
        assert.equal(op.responses['429'], undefined, what);
        continue;
      }
      limited += 1;
      const tooMany = op.responses['429'];
      assert.match(String(tooMany?.description), /42901.*\n.*42902/, what);
      assert.deepEqual(
        refs(tooMany),
        ['X-Request-Id', 'Retry-After', 'RateLimit', 'RateLimit-Policy'],
        what,
      );
      for (const [status, response] of Object.entries(op.responses)) {
        assert.ok(refs(response).includes('RateLimit'), `${what} ${status}`);
        assert.ok(refs(response).includes('RateLimit-Policy'), `${what} ${status}`);
      }
    }
  }
  assert.equal(limited, 14, 'the five plant operations, the eight of /webhooks and /events');
  for (const name of ['RateLimit', 'RateLimit-Policy', 'Retry-After']) {
    assert.match(String(doc.components.headers[name]?.description), /\S/, name);
  }
  assert.match(
    String(doc.components.headers['RateLimit-Policy']?.description),
    /"token";q=100000;w=60.*"failed-auth";q=100;w=60/s,
  );
});
