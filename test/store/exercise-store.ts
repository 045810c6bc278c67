import assert from 'node:assert/strict';
import { INT64_MAX } from '../../src/core/int64.js';
import type { NewPlant } from '../../src/core/plant.js';
import { PlantChangedError, PlantExistsError, type Store } from '../../src/store/store.js';

// Calls every method of a Store (and checks that it did), each way that runs a statement of
// its own (every filter combination of a list, the conditional and plain forms of a write,
// each outcome of a webhook attempt...), so that a test that records the statements a store runs sees them
// all (test/store/query-plans.test.ts). What the calls answer is the contract tests' business;
// the few assertions here only check that each path was really taken.

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const FAR = new Date('2100-01-01T00:00:00Z');

const attempt = (httpStatus: number | null) => ({
  at: T0,
  durationMs: 5,
  httpStatus,
  error: httpStatus === null ? 'connect ECONNREFUSED' : null,
  responseExcerpt: '',
});

/** What no statement of its own runs: listeners, the pool's state, closing. */
const NOT_STATEMENTS = new Set([
  'close',
  'connections',
  'othersBusy',
  'onRemoteMessages',
  'onMessages',
  'onEvents',
  'onAppended',
]);

/**
 * `store` with every call of a method recorded, and the methods of it and its parts (plants,
 * tokens, ...) that were never called: a method added to the Store must be added here too.
 */
function tracked(store: Store): { store: Store; uncalled: () => string[] } {
  const methods = new Set<string>();
  const called = new Set<string>();
  const wrap = <T extends object>(target: T, prefix: string): T => {
    for (const [key, value] of Object.entries(target)) {
      if (typeof value === 'function' && !NOT_STATEMENTS.has(key)) methods.add(prefix + key);
    }
    return new Proxy(target, {
      get(object, key, receiver) {
        const value: unknown = Reflect.get(object, key, receiver);
        if (typeof key !== 'string') return value;
        if (typeof value === 'function') {
          called.add(prefix + key);
          return value.bind(object);
        }
        return value !== null && typeof value === 'object' && key !== 'migration'
          ? wrap(value, `${prefix}${key}.`)
          : value;
      },
    });
  };
  return {
    store: wrap(store, ''),
    uncalled: () => [...methods].filter((method) => !called.has(method)),
  };
}

export async function exerciseStore(given: Store): Promise<void> {
  const { store, uncalled } = tracked(given);
  await run(store);
  assert.deepEqual(uncalled(), [], 'Store methods exercise-store.ts never calls: call them');
}

async function run(store: Store): Promise<void> {
  await store.ping();

  // Tokens.
  const token = await store.tokens.create({
    name: 'plans',
    hash: 'b'.repeat(64),
    scopes: ['plants:read'],
    createdAt: T0,
    expiresAt: null,
  });
  await store.tokens.findByHash(token.hash);
  await store.tokens.list();
  await store.tokens.touch(token.id, T0);
  assert.equal(await store.tokens.revoke(token.id, T0), 'revoked');
  assert.equal(await store.tokens.revoke(token.id, T0), 'already-revoked');

  // An endpoint for every event first, so that each plant write below writes messages.
  const events = ['plant.created', 'plant.updated', 'plant.deleted'] as const;
  const hook = { url: 'https://hooks.example/', events: [...events], secret: 'whsec_a', at: T0 };
  const endpoint = await store.webhooks.create({ ...hook, description: 'all' }, 10);
  const doomed = await store.webhooks.create(hook);

  // Plants: ids taken by clients first, so that a server create draws a taken id and skips
  // the run (1..3); then client ids above the counter, merged into runs every way.
  for (const id of [1n, 2n, 3n]) await store.plants.insert({ id, name: `p${id}` });
  const server = await store.plants.insert({ name: 'server' }, { by: { tokenId: 1 } });
  assert.ok(server.id > 3n, `a server create skips the taken ids: got ${server.id}`);
  for (const id of [100n, 102n, 101n, 99n, INT64_MAX]) {
    await store.plants.insert({ id, name: `c${id}`, tag: 'green' }, { by: { requestId: 'r' } });
  }
  await assert.rejects(store.plants.insert({ id: 1n, name: 'again' }), PlantExistsError);
  await store.plants.get(1n);
  await store.plants.list({ limit: 10 });
  await store.plants.list({ limit: 10, after: 1n });
  await store.plants.list({ limit: 10, tag: 'green' });
  await store.plants.list({ limit: 10, tag: 'green', after: 99n });
  const updated = await store.plants.update(1n, { name: 'one', tag: 'x' });
  assert.ok(updated);
  await store.plants.update(1n, { tag: null }, { expected: updated });
  await assert.rejects(
    store.plants.update(1n, { name: 'stale' }, { expected: updated }),
    PlantChangedError,
  );
  assert.equal(await store.plants.update(5_000n, { name: 'none' }), undefined);
  const two = await store.plants.get(2n);
  assert.ok(await store.plants.delete(2n, { expected: two! }));
  assert.ok(await store.plants.delete(3n));
  assert.equal(await store.plants.delete(3n), false);

  // Idempotency keys: a new key, one in flight, one settled by a create, one by a refusal,
  // one released.
  const claim = { tokenId: 1, key: 'k1', fingerprint: 'f', at: T0 };
  assert.deepEqual(await store.idempotency.claim(claim), { state: 'claimed' });
  assert.deepEqual(await store.idempotency.claim(claim), { state: 'in-flight' });
  await store.plants.insert({ name: 'keyed' }, { idempotencyKey: { tokenId: 1, key: 'k1' } });
  await store.idempotency.claim({ ...claim, key: 'k4' });
  await store.plants.insert(
    { id: 200n, name: 'keyed' },
    { idempotencyKey: { tokenId: 1, key: 'k4' } },
  );
  // A key new to the store takes one write (server and client ids); a known one, none.
  const fresh = (key: string) => ({ claim: { ...claim, key } });
  const keyed = async (plant: NewPlant, key: string) =>
    (await store.plants.insertWithKey(plant, fresh(key))).state;
  assert.equal(await keyed({ name: 'k5' }, 'k5'), 'created');
  assert.equal(await keyed({ id: 201n, name: 'k6' }, 'k6'), 'created');
  assert.equal(await keyed({ name: 'k5' }, 'k5'), 'answered');
  await store.idempotency.claim({ ...claim, key: 'k2' });
  await store.idempotency.settle(
    { tokenId: 1, key: 'k2' },
    { name: 'plantExists', message: 'exists' },
  );
  await store.idempotency.claim({ ...claim, key: 'k3' });
  await store.idempotency.release({ tokenId: 1, key: 'k3' });
  await store.idempotency.prune(FAR, 10);

  // The audit trail, every filter combination.
  const [first] = await store.audit.list({ limit: 1 });
  assert.ok(first);
  for (const since of [undefined, T0]) {
    for (const plantId of [undefined, 1n]) {
      for (const afterSeq of [undefined, first.seq]) {
        await store.audit.list({ since, plantId, afterSeq, limit: 10 });
      }
    }
  }
  await store.audit.prune(new Date(0), 10);

  // Endpoints.
  await store.webhooks.get(endpoint.id);
  await store.webhooks.list({ limit: 10 });
  await store.webhooks.list({ limit: 10, after: endpoint.id });
  await store.webhooks.update(endpoint.id, { description: null, enabled: true }, T0);
  await store.webhooks.rotateSecret(endpoint.id, 'whsec_b', T0, at(1000));

  // The fan-out of the writes' events: as one fan-out of a `serve` process would.
  while ((await store.webhookEvents.fanOut(1000)).endpoints > 0);

  // The queue: claims, each outcome of an attempt, a release, a retry asked for.
  const q = store.webhookQueue;
  await q.nextDue(T0);
  await q.depth();
  const claimed = await q.claim(FAR, 60_000, 100);
  assert.ok(claimed.length >= 6, `messages to claim: ${claimed.length}`);
  // The last delivery follows failures: it makes the retry due at once (the recovery).
  const outcomes = [
    { kind: 'delivered' },
    { kind: 'retry', at: FAR },
    { kind: 'failed' },
    { kind: 'delivered' },
  ] as const;
  const mine = claimed.filter((message) => message.endpoint.id === endpoint.id);
  assert.ok(mine.length > outcomes.length, `messages of the endpoint: ${mine.length}`);
  for (const [i, message] of mine.entries()) {
    const outcome = outcomes[i];
    if (outcome === undefined) {
      assert.ok(await q.release(message.id, message.claimedUntil, FAR));
    } else {
      assert.ok(await q.finish(message.id, message.claimedUntil, attempt(500), outcome));
    }
  }
  const [toDoomed] = claimed.filter((message) => message.endpoint.id === doomed.id);
  assert.ok(toDoomed);
  assert.ok(await q.finish(toDoomed.id, toDoomed.claimedUntil, attempt(410), { kind: 'gone' }));
  const finished = mine[0]!;
  for (const status of [undefined, 'delivered'] as const) {
    for (const after of [undefined, finished.id + 1n]) {
      await store.webhooks.deliveries({ endpointId: endpoint.id, limit: 10, after, status });
    }
  }
  await store.webhooks.retry(endpoint.id, finished.id, T0);
  await q.disableFailing(T0, T0);
  await q.purge(FAR);
  assert.ok(await store.webhooks.delete(doomed.id));

  // The changes feed: the audit entries of the writes above, read as events.
  await store.events.settle?.();
  const logged = (await store.events.read(undefined, 3)).events;
  assert.equal(logged.length, 3);
  await store.events.read(logged[0]!.position, 2);
  await store.events.head();
  assert.equal(await store.events.prune(FAR, 1), 1);
  while ((await store.events.prune(FAR, 2)) === 2);

  // What only some databases have.
  if (store.rateLimits) {
    const count = { policy: 'token', subject: '1', windowStart: 0, windowEnd: 60, count: 1 };
    await store.rateLimits.add([count, { ...count, subject: '2' }]);
    await store.rateLimits.purge(30);
  }
  if (store.pruneTakenIds) {
    // A batch of one finds a full batch, so that the next call goes on from it; then the rest.
    assert.equal(await store.pruneTakenIds(1), 1);
    while ((await store.pruneTakenIds(2)) === 2);
  }
}
