import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  LAST_USED_RESOLUTION_MS,
  TOKEN_CACHE_TTL_MS,
  TokenService,
} from '../../src/service/token-service.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { makeTempDir } from '../helpers/setup.js';

/** Two services on one database, like a server and the CLI, sharing a settable clock. */
function services(t: Parameters<typeof makeTempDir>[0]) {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'tokens.db') });
  t.after(() => store.close());
  let now = Date.parse('2026-01-01T00:00:00Z');
  const clock = () => new Date(now);
  return {
    server: new TokenService(store.tokens, { now: clock }),
    cli: new TokenService(store.tokens, { now: clock }),
    advance: (ms: number) => (now += ms),
  };
}

test('a revocation elsewhere takes effect once the cache entry is older than the bound', async (t) => {
  const { server, cli, advance } = services(t);
  const { token, record } = await cli.create({
    name: 'x',
    scopes: ['plants:read'],
    expiresInMs: null,
  });
  assert.equal((await server.authenticate(token))?.id, record.id);
  await cli.revoke(record.id);
  advance(TOKEN_CACHE_TTL_MS - 1);
  assert.equal((await server.authenticate(token))?.id, record.id, 'still cached');
  advance(1);
  assert.equal(await server.authenticate(token), undefined);
});

test('a revocation through the same service takes effect at once', async (t) => {
  const { server } = services(t);
  const { token, record } = await server.create({
    name: 'x',
    scopes: ['plants:read'],
    expiresInMs: null,
  });
  assert.ok(await server.authenticate(token));
  await server.revoke(record.id);
  assert.equal(await server.authenticate(token), undefined);
});

test('expiry is exact even while the token is cached', async (t) => {
  const { server, advance } = services(t);
  const { token } = await server.create({ name: 'x', scopes: ['plants:read'], expiresInMs: 1_000 });
  assert.ok(await server.authenticate(token));
  advance(999);
  assert.ok(await server.authenticate(token));
  advance(1);
  assert.equal(await server.authenticate(token), undefined);
});

test('recording "last used" never holds up authentication', async (t) => {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'tokens.db') });
  t.after(() => store.close());
  const hanging = { ...store.tokens, touch: () => new Promise<void>(() => {}) };
  const tokens = new TokenService(hanging);
  const { token, record } = await tokens.create({
    name: 'x',
    scopes: ['plants:read'],
    expiresInMs: null,
  });
  // A new token has never been used, so its first use is due a "last used" write.
  const answer = await Promise.race([
    Promise.resolve(tokens.authenticate(token)),
    new Promise((resolve) => setTimeout(() => resolve('held up'), 1_000)),
  ]);
  assert.equal((answer as { id?: number }).id, record.id);
});

test('a stale token is re-checked with one query, and stays known meanwhile', async (t) => {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'tokens.db') });
  t.after(() => store.close());
  let now = Date.parse('2026-01-01T00:00:00Z');
  let queries = 0;
  let release = () => {};
  let held = false;
  const counting = {
    ...store.tokens,
    findByHash: async (hash: string) => {
      queries += 1;
      if (held) await new Promise<void>((resolve) => (release = resolve));
      return store.tokens.findByHash(hash);
    },
  };
  const tokens = new TokenService(counting, { now: () => new Date(now) });
  const { token, record } = await tokens.create({ name: 'x', scopes: [], expiresInMs: null });
  assert.equal((await tokens.authenticate(token))?.id, record.id);
  now += TOKEN_CACHE_TTL_MS;
  held = true;
  const answers = Array.from({ length: 10 }, () => Promise.resolve(tokens.authenticate(token)));
  assert.equal(tokens.knownValid(token), true, 'known while its re-check runs');
  release();
  for (const answer of await Promise.all(answers)) assert.equal(answer?.id, record.id);
  assert.equal(queries, 2, 'the first use, then one re-check for ten requests');
});

test('a lookup that raced a revocation through the service is not cached', async (t) => {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'tokens.db') });
  t.after(() => store.close());
  let release = () => {};
  let held = false;
  const slow = {
    ...store.tokens,
    findByHash: async (hash: string) => {
      const record = await store.tokens.findByHash(hash);
      if (held) await new Promise<void>((resolve) => (release = resolve));
      return record;
    },
  };
  const tokens = new TokenService(slow);
  const { token, record } = await tokens.create({ name: 'x', scopes: [], expiresInMs: null });
  held = true;
  const first = Promise.resolve(tokens.authenticate(token));
  await tokens.revoke(record.id);
  release();
  held = false;
  await first;
  assert.equal(await tokens.authenticate(token), undefined, 'revoked from the next request');
});

test('"last used" bookkeeping keeps the tokens of the last minute only, and still saves once a minute', async (t) => {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'tokens.db') });
  t.after(() => store.close());
  let now = Date.parse('2026-01-01T00:00:00Z');
  const touches: number[] = [];
  const touch = store.tokens.touch.bind(store.tokens);
  store.tokens.touch = (id, at) => {
    touches.push(id);
    return touch(id, at);
  };
  const server = new TokenService(store.tokens, { now: () => new Date(now) });
  const tokens = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      server.create({ name: `t${i}`, scopes: ['plants:read'], expiresInMs: null }),
    ),
  );
  const kept = () => (server as unknown as { lastTouched: Map<number, number> }).lastTouched.size;
  for (const { token } of tokens) assert.ok(await server.authenticate(token));
  assert.equal(kept(), 50);
  assert.equal(touches.length, 50);
  now += LAST_USED_RESOLUTION_MS;
  const [{ token, record }] = tokens as [(typeof tokens)[0]];
  assert.ok(await server.authenticate(token));
  assert.equal(kept(), 1, 'the 49 others, a minute old, are forgotten');
  // The rhythm of saving is the same: not again within the minute, again after it.
  now += TOKEN_CACHE_TTL_MS;
  assert.ok(await server.authenticate(token));
  assert.equal(touches.length, 51);
  now += LAST_USED_RESOLUTION_MS - TOKEN_CACHE_TTL_MS;
  assert.ok(await server.authenticate(token));
  assert.deepEqual(touches.slice(50), [record.id, record.id]);
});

test('at its cap the cache makes room by dropping the entry looked up longest ago', async (t) => {
  const store = openSqliteStore({ file: join(makeTempDir(t), 'tokens.db') });
  t.after(() => store.close());
  let now = Date.parse('2026-01-01T00:00:00Z');
  const server = new TokenService(store.tokens, { now: () => new Date(now), cacheMax: 3 });
  const made: string[] = [];
  for (const name of ['a', 'b', 'c', 'd', 'e', 'f', 'g']) {
    made.push((await server.create({ name, scopes: ['plants:read'], expiresInMs: null })).token);
  }
  const [a, b, c, d, e, f, g] = made as [string, string, string, string, string, string, string];
  const known = () => made.filter((token) => server.knownValid(token)).map((x) => made.indexOf(x));
  for (const token of [a, b, c]) assert.ok(await server.authenticate(token));
  assert.deepEqual(known(), [0, 1, 2]);
  assert.ok(await server.authenticate(d));
  assert.ok(await server.authenticate(e));
  assert.deepEqual(known(), [2, 3, 4], 'a and b, the oldest, made room');
  // c is looked up again once its entry lapses: it is then the newest.
  now += TOKEN_CACHE_TTL_MS;
  assert.ok(await server.authenticate(c));
  assert.ok(await server.authenticate(f));
  assert.deepEqual(known(), [2, 4, 5], 'd made room, not c');
  assert.ok(await server.authenticate(g));
  assert.deepEqual(known(), [2, 5, 6], 'then e');
  assert.ok(await server.authenticate(a));
  assert.deepEqual(known(), [0, 5, 6], 'then c');
});
