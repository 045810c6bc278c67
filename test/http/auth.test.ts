import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TOKEN_CACHE_TTL_MS, TokenService } from '../../src/service/token-service.js';
import { body, setup } from '../helpers/setup.js';

// Authentication and authorisation at the HTTP boundary (docs/decisions.md §3, §5, §6).

const REALM = 'Bearer realm="plantstore"';
const INVALID = `${REALM}, error="invalid_token"`;
const MISSING = {
  error: 40102n,
  message: 'Send the header "Authorization: Bearer <ACCESS_TOKEN>".',
};
const INVALID_BODY = { error: 40101n, message: 'The access token is unknown, revoked or expired.' };

interface Answer {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

function assertMissing(res: Answer, what: string): void {
  assert.equal(res.statusCode, 401, what);
  assert.equal(res.headers['www-authenticate'], REALM, what);
  assert.match(String(res.headers['content-type']), /^application\/json/, what);
  assert.deepEqual(body(res), MISSING, what);
}

function assertInvalid(res: Answer, what: string): void {
  assert.equal(res.statusCode, 401, what);
  assert.equal(res.headers['www-authenticate'], INVALID, what);
  assert.deepEqual(body(res), INVALID_BODY, what);
}

function assertScope(res: Answer, scope: string, what: string): void {
  assert.equal(res.statusCode, 403, what);
  assert.equal(
    res.headers['www-authenticate'],
    `${REALM}, error="insufficient_scope", scope="${scope}"`,
    what,
  );
  assert.deepEqual(
    body(res),
    { error: 40301n, message: `This operation needs the scope "${scope}".` },
    what,
  );
}

const PLANT_OPERATIONS = [
  { method: 'GET', url: '/plants' },
  { method: 'GET', url: '/plants/1' },
  { method: 'POST', url: '/plants', json: '{"id":1,"name":"Fern"}' },
  { method: 'PATCH', url: '/plants/1', json: '{"name":"Moss"}' },
  { method: 'DELETE', url: '/plants/1' },
] as const;

test('every plant operation without an Authorization header is 401 40102 with the realm challenge', async (t) => {
  const { call } = await setup(t);
  for (const op of PLANT_OPERATIONS) {
    const res = await call({ ...op, token: null });
    assertMissing(res, `${op.method} ${op.url}`);
  }
});

test('non-bearer schemes are missing credentials (401 40102)', async (t) => {
  const { call, token } = await setup(t);
  for (const authorization of [
    `Basic ${Buffer.from('user:pass').toString('base64')}`,
    `Token ${token}`,
    'Token x',
    `Digest ${token}`,
    `Bearer-${token}`,
    `${token}`,
  ]) {
    const res = await call({
      method: 'GET',
      url: '/plants',
      token: null,
      headers: { authorization },
    });
    assertMissing(res, authorization);
  }
});

test('Bearer with no token, or a token with characters outside b64token, is 401 40102', async (t) => {
  const { call, token } = await setup(t);
  for (const authorization of [
    'Bearer',
    'Bearer ',
    'Bearer    ',
    `Bearer ${token} extra`,
    `Bearer ${token}!`,
    `Bearer ${token},`,
    'Bearer a"b',
    `Bearer =${token}`,
    `Bearer\t${token}`,
    ` Bearer ${token}`,
    `Bearer ${token} `,
    'Bearer é',
  ]) {
    const res = await call({
      method: 'GET',
      url: '/plants',
      token: null,
      headers: { authorization },
    });
    assertMissing(res, JSON.stringify(authorization));
  }
});

test('an unknown token of a valid shape is 401 40101 with error="invalid_token"', async (t) => {
  const { call, token } = await setup(t);
  // Same shape and prefix as a real token, one character changed.
  const last = token.at(-1) === 'A' ? 'B' : 'A';
  for (const unknown of ['pst_unknown', `${token.slice(0, -1)}${last}`, 'abc==']) {
    const res = await call({ method: 'GET', url: '/plants', token: unknown });
    assertInvalid(res, unknown);
  }
});

test('an expired token is 401 40101 invalid_token', async (t) => {
  const clock = { now: Date.now() };
  const { call, newToken } = await setup(t, { now: () => clock.now });
  const shortLived = await newToken(['plants:read', 'plants:write'], 20);
  clock.now += 19;
  const living = await call({ method: 'GET', url: '/plants', token: shortLived });
  assert.equal(living.statusCode, 200, 'a millisecond before it expires');
  clock.now += 1;
  const res = await call({ method: 'GET', url: '/plants', token: shortLived });
  assertInvalid(res, 'expired');
});

test('a token created with a clock in the past and expired by now is 401 40101', async (t) => {
  const { call, store } = await setup(t);
  const past = new TokenService(store.tokens, { now: () => new Date(Date.now() - 3_600_000) });
  const { token } = await past.create({
    name: 'old',
    scopes: ['plants:read'],
    expiresInMs: 60_000,
  });
  assertInvalid(await call({ method: 'GET', url: '/plants', token }), 'expired an hour ago');
});

test('a token that has not yet expired is accepted', async (t) => {
  const { call, newToken } = await setup(t);
  const living = await newToken(['plants:read'], 60_000);
  const res = await call({ method: 'GET', url: '/plants', token: living });
  assert.equal(res.statusCode, 200);
});

test('a token revoked elsewhere (CLI, other instance) is 401 invalid_token within 2 s', async (t) => {
  const clock = { now: Date.now() };
  const { call, tokens, newToken } = await setup(t, { now: () => clock.now });
  const doomed = await newToken(['plants:read']);
  assert.equal((await call({ method: 'GET', url: '/plants', token: doomed })).statusCode, 200);
  const listed = await tokens.list();
  const readOnly = listed.filter((record) => record.scopes.join(',') === 'plants:read');
  assert.equal(readOnly.length, 1);
  // `tokens` is not the app's TokenService, as the CLI's would not be.
  assert.equal(await tokens.revoke(readOnly[0]!.id), 'revoked');
  // The app looked the token up when it was used, just now: by the bound, its cached answer
  // has lapsed, and the revocation is seen.
  clock.now += TOKEN_CACHE_TTL_MS;
  const res = await call({ method: 'GET', url: '/plants', token: doomed });
  assertInvalid(res, 'revoked');
  // The other token still works.
  assert.equal((await call({ method: 'GET', url: '/plants' })).statusCode, 200);
});

test('a read-only token on POST, PATCH and DELETE is 403 40301 needing plants:write', async (t) => {
  const { call, newToken } = await setup(t);
  await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"Fern"}' });
  const reader = await newToken(['plants:read']);
  for (const op of PLANT_OPERATIONS.filter((o) => o.method !== 'GET')) {
    const res = await call({ ...op, token: reader });
    assertScope(res, 'plants:write', `${op.method} ${op.url}`);
  }
  // Nothing was changed: the plant is still there with its name.
  const still = await call({ method: 'GET', url: '/plants/1', token: reader });
  assert.equal(still.statusCode, 200);
  assert.deepEqual(body(still), { id: 1n, name: 'Fern' });
});

test('a write-only token on GET is 403 40301 needing plants:read', async (t) => {
  const { call, newToken } = await setup(t);
  const writer = await newToken(['plants:write']);
  for (const url of ['/plants', '/plants/1', '/plants?limit=5']) {
    const res = await call({ method: 'GET', url, token: writer });
    assertScope(res, 'plants:read', url);
  }
  const created = await call({
    method: 'POST',
    url: '/plants',
    token: writer,
    json: '{"id":2,"name":"Ivy"}',
  });
  assert.equal(created.statusCode, 201);
});

test('a token with no scope at all is 403 on reads and writes', async (t) => {
  const { call, newToken } = await setup(t);
  const none = await newToken([]);
  assertScope(await call({ method: 'GET', url: '/plants', token: none }), 'plants:read', 'GET');
  assertScope(
    await call({ method: 'DELETE', url: '/plants/1', token: none }),
    'plants:write',
    'DELETE',
  );
});

test('the bearer scheme is case-insensitive and takes one or more spaces', async (t) => {
  const { call, token } = await setup(t);
  for (const authorization of [
    `Bearer ${token}`,
    `bearer ${token}`,
    `BEARER ${token}`,
    `bEaReR ${token}`,
    `Bearer  ${token}`,
    `bearer     ${token}`,
  ]) {
    const res = await call({
      method: 'GET',
      url: '/plants',
      token: null,
      headers: { authorization },
    });
    assert.equal(res.statusCode, 200, authorization);
    assert.deepEqual(body(res), []);
  }
});

test('the token itself is case-sensitive', async (t) => {
  const { call, token } = await setup(t);
  const flipped = token.toUpperCase() === token ? token.toLowerCase() : token.toUpperCase();
  assertInvalid(await call({ method: 'GET', url: '/plants', token: flipped }), 'case-flipped');
});

test('authentication comes before input validation: DELETE /plants/abc without a token is 401', async (t) => {
  const { call } = await setup(t);
  assertMissing(await call({ method: 'DELETE', url: '/plants/abc', token: null }), 'no token');
  assertInvalid(
    await call({ method: 'DELETE', url: '/plants/abc', token: 'pst_nope' }),
    'unknown token',
  );
  const bad = await call({ method: 'DELETE', url: '/plants/abc' });
  assert.equal(bad.statusCode, 400);
  assert.equal(body<{ error: bigint }>(bad).error, 40001n);
});

test('authorisation comes before input validation: DELETE /plants/abc read-only is 403', async (t) => {
  const { call, newToken } = await setup(t);
  const reader = await newToken(['plants:read']);
  assertScope(
    await call({ method: 'DELETE', url: '/plants/abc', token: reader }),
    'plants:write',
    'read-only',
  );
});

test('POST /plants with malformed JSON and no token is 401, not 400', async (t) => {
  const { call, newToken } = await setup(t);
  assertMissing(
    await call({ method: 'POST', url: '/plants', token: null, json: '{"id":1,' }),
    'no token',
  );
  const reader = await newToken(['plants:read']);
  assertScope(
    await call({ method: 'POST', url: '/plants', token: reader, json: '{"id":1,' }),
    'plants:write',
    'read-only',
  );
  const withToken = await call({ method: 'POST', url: '/plants', json: '{"id":1,' });
  assert.equal(withToken.statusCode, 400);
  assert.equal(body<{ error: bigint }>(withToken).error, 40003n);
});

test('POST /plants with an unsupported media type and no token is 401, not 415', async (t) => {
  const { call } = await setup(t);
  assertMissing(
    await call({
      method: 'POST',
      url: '/plants',
      token: null,
      payload: 'id=1',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    }),
    'form body',
  );
});

test('routing comes before authentication: PUT /plants/1 without a token is 405', async (t) => {
  const { call } = await setup(t);
  const res = await call({ method: 'PUT', url: '/plants/1', token: null, json: '{}' });
  assert.equal(res.statusCode, 405);
  assert.equal(res.headers.allow, 'GET, PATCH, DELETE');
  assert.equal(res.headers['www-authenticate'], undefined);
  assert.equal(body<{ error: bigint }>(res).error, 40501n);
  const unknown = await call({ method: 'GET', url: '/nowhere', token: null });
  assert.equal(unknown.statusCode, 404);
  assert.equal(unknown.headers['www-authenticate'], undefined);
  assert.equal(body<{ error: bigint }>(unknown).error, 40402n);
});

test('operational endpoints need no token, and ignore a bad one', async (t) => {
  const { call } = await setup(t);
  for (const url of ['/healthz', '/readyz', '/openapi.json', '/docs', '/docs/swagger-ui.css']) {
    for (const token of [null, 'pst_nope']) {
      const res = await call({ method: 'GET', url, token });
      assert.equal(res.statusCode, 200, `${url} with ${token}`);
      assert.equal(res.headers['www-authenticate'], undefined, url);
    }
  }
});
