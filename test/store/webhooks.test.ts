import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import pg from 'pg';
import { INT64_MAX } from '../../src/core/int64.js';
import { plantPayload, type WebhookEvent } from '../../src/core/webhooks/events.js';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { type FanOutWake, PlantExistsError, type Store } from '../../src/store/store.js';
import { forEachBackend } from '../helpers/backends.js';
import { fanOutAll } from '../helpers/fan-out.js';
import { freshOwnDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';

/** Opens a second store on the same database as the first, or the first one. */
type Open = (t: TestContext) => Promise<{ store: Store; another: () => Promise<Store> }>;

const T0 = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const attempt = (status: number | null, when = T0) => ({
  at: when,
  durationMs: 12,
  httpStatus: status,
  error: status === null ? 'connect ECONNREFUSED' : null,
  responseExcerpt: status === null ? '' : 'ok\u0000',
});

async function subscribe(store: Store, events: readonly WebhookEvent[] = ['plant.created']) {
  return store.webhooks.create({
    url: 'https://example.com/hook',
    events: [...events],
    secret: 'whsec_first',
    at: new Date(),
  });
}

/** Claims everything due far in the future (message times are the wall clock's). */
const FAR = new Date('2100-01-01T00:00:00Z');

/** The webhook store contract, on each backend of the loop. */
function webhookContract(open: Open): void {
  describe('the webhook store contract', () => {
    it('keeps endpoints: create, read, list, merge-patch, rotate, delete', async (t) => {
      const { store } = await open(t);
      const a = await store.webhooks.create({
        url: 'https://a.example/x',
        events: ['plant.created', 'plant.deleted'],
        description: 'first',
        secret: 'whsec_a',
        at: T0,
      });
      assert.equal(a.enabled, true);
      assert.deepEqual(a.events, ['plant.created', 'plant.deleted']);
      assert.equal(a.createdAt.getTime(), T0.getTime());
      const b = await store.webhooks.create({
        url: 'https://b.example/',
        events: ['plant.updated'],
        secret: 'whsec_b',
        at: T0,
      });
      assert.equal(b.description, undefined);
      assert.deepEqual(await store.webhooks.get(a.id), a);
      assert.deepEqual(
        (await store.webhooks.list({ limit: 10 })).map((e) => e.id),
        [a.id, b.id],
      );
      assert.deepEqual(
        (await store.webhooks.list({ limit: 10, after: a.id })).map((e) => e.id),
        [b.id],
      );
      const patched = await store.webhooks.update(
        a.id,
        { description: null, enabled: false },
        at(5),
      );
      assert.equal(patched?.description, undefined);
      assert.equal(patched?.enabled, false);
      assert.equal(patched?.url, a.url);
      assert.equal(patched?.updatedAt.getTime(), at(5).getTime());
      assert.equal(await store.webhooks.update(999n, { enabled: true }, T0), undefined);
      assert.ok(await store.webhooks.rotateSecret(a.id, 'whsec_a2', at(6), at(7)));
      assert.equal(await store.webhooks.rotateSecret(999n, 'x', T0, T0), undefined);
      assert.equal(await store.webhooks.delete(a.id), true);
      assert.equal(await store.webhooks.delete(a.id), false);
      assert.equal(await store.webhooks.get(a.id), undefined);
    });

    it('a change wakes the fan-out, which writes its messages from the log, ids exact', async (t) => {
      const { store } = await open(t);
      const fanOutWakes: FanOutWake[] = [];
      let wakes = 0;
      store.webhookEvents.onEvents((why) => fanOutWakes.push(why));
      store.webhookQueue.onMessages(() => (wakes += 1));
      await store.plants.insert({ id: 1n, name: 'before' });
      const created = await subscribe(store);
      const all = await subscribe(store, [
        'plant.created',
        'plant.updated',
        'plant.deleted',
      ] as never);
      assert.deepEqual(fanOutWakes, ['events', 'room', 'room'], 'a write; a new endpoint');
      const plant = await store.plants.insert({
        id: INT64_MAX,
        name: 'Fern "q" \\ \n é',
        tag: 't',
      });
      await store.plants.update(INT64_MAX, { tag: null });
      await store.plants.delete(INT64_MAX);
      await assert.rejects(store.plants.insert({ id: 1n, name: 'dup' }), PlantExistsError);
      assert.deepEqual(fanOutWakes.slice(3), ['events', 'events', 'events'], 'not a failed write');
      assert.equal(wakes, 0, 'the writes wrote no message themselves');
      assert.equal(await fanOutAll(store), 4, "not 'before', written before the endpoints");
      assert.ok(wakes > 0, 'the fan-out woke the dispatcher');
      const claimed = await store.webhookQueue.claim(FAR, 60_000, 10);
      const seen = claimed.map((m) => [m.endpoint.id, m.eventType, m.payload]);
      const body = plantPayload(plant);
      assert.equal(body, '{"id":9223372036854775807,"name":"Fern \\"q\\" \\\\ \\n é","tag":"t"}');
      assert.deepEqual(seen, [
        [created.id, 'plant.created', body],
        [all.id, 'plant.created', body],
        [all.id, 'plant.updated', plantPayload({ id: INT64_MAX, name: plant.name })],
        [all.id, 'plant.deleted', plantPayload({ id: INT64_MAX, name: plant.name })],
      ]);
      for (const message of claimed) {
        assert.match(message.webhookId, /^msg_[0-9a-f]{32}$/);
        assert.equal(message.attempt, 1);
        assert.deepEqual(message.endpoint.secrets, ['whsec_first']);
      }
      assert.equal(new Set(claimed.map((m) => m.webhookId)).size, 4);
    });

    it('leases a claim: no second claim until it ends, then the same webhook-id again', async (t) => {
      const { store } = await open(t);
      await subscribe(store);
      await store.plants.insert({ name: 'p' });
      await fanOutAll(store);
      const due = await store.webhookQueue.nextDue(T0);
      assert.ok(due !== null && due.getTime() <= Date.now());
      const now = new Date(Date.now() + 1000);
      const [first] = await store.webhookQueue.claim(now, 30_000, 10);
      assert.ok(first);
      assert.deepEqual(await store.webhookQueue.claim(now, 30_000, 10), []);
      // Leased at `now`: due when the lease ends.
      assert.equal(
        (await store.webhookQueue.nextDue(now))?.getTime(),
        first.claimedUntil.getTime(),
      );
      const later = new Date(first.claimedUntil.getTime());
      const [again] = await store.webhookQueue.claim(later, 30_000, 10);
      assert.equal(again?.webhookId, first.webhookId);
      assert.equal(again?.attempt, 2);
      assert.equal(
        await store.webhookQueue.finish(first.id, first.claimedUntil, attempt(200), {
          kind: 'delivered',
        }),
        false,
        'the first lease is over: its outcome is not recorded',
      );
      assert.equal(
        await store.webhookQueue.finish(again!.id, again!.claimedUntil, attempt(200), {
          kind: 'delivered',
        }),
        true,
      );
      assert.equal(await store.webhookQueue.nextDue(T0), null);
    });

    it("looks past a backlog due by the claim for another endpoint's retry", async (t) => {
      const { store } = await open(t);
      const q = store.webhookQueue;
      const hung = await subscribe(store, ['plant.created']);
      const healthy = await subscribe(store, ['plant.deleted']);
      // More messages due for one endpoint than nextDue's window holds (NEXT_DUE_WINDOW).
      for (let i = 0; i < 11; i++) {
        await Promise.all(
          Array.from({ length: 100 }, (_, j) => store.plants.insert({ name: `p${i}.${j}` })),
        );
      }
      const plant = await store.plants.insert({ name: 'last' });
      await store.plants.delete(plant.id);
      await fanOutAll(store);
      const now = new Date(Date.now() + 1000);
      const shares = { perEndpoint: 10, endpoints: new Map([[hung.id, 0]]) };
      const [message] = await q.claim(now, 30_000, 10, shares);
      assert.equal(message?.endpoint.id, healthy.id);
      const retryAt = new Date(now.getTime() + 60_000);
      assert.ok(
        await q.finish(message.id, message.claimedUntil, attempt(503, now), {
          kind: 'retry',
          at: retryAt,
        }),
      );
      // Every message of the window is due by `now` and held back by its share: the next
      // thing due after the claim is the healthy endpoint's retry, past the window.
      assert.equal((await q.nextDue(now))?.getTime(), retryAt.getTime());
      assert.ok((await q.nextDue(T0))!.getTime() <= now.getTime(), 'the backlog, after T0');
    });

    it('gives back an unattempted claim: not counted, free at once or kept leased', async (t) => {
      const { store } = await open(t);
      const q = store.webhookQueue;
      await subscribe(store);
      await store.plants.insert({ name: 'p' });
      await fanOutAll(store);
      const now = new Date(Date.now() + 1000);
      const [first] = await q.claim(now, 30_000, 10);
      // Kept leased: no claim takes it before the lease ends, and it is still attempt 1.
      assert.equal(await q.release(first!.id, first!.claimedUntil, first!.claimedUntil), true);
      assert.deepEqual(await q.claim(now, 30_000, 10), []);
      const [second] = await q.claim(first!.claimedUntil, 30_000, 10);
      assert.equal(second?.attempt, 1);
      // Free at once: the next claim takes it, still as attempt 1.
      assert.equal(await q.release(second!.id, second!.claimedUntil, first!.claimedUntil), true);
      const [third] = await q.claim(first!.claimedUntil, 40_000, 10);
      assert.equal(third?.webhookId, first!.webhookId);
      assert.equal(third?.attempt, 1);
      // A lease that is no longer this claim's is not given back.
      assert.equal(await q.release(second!.id, second!.claimedUntil, first!.claimedUntil), false);
    });

    it('records attempts: retry when due, delivered, failed; lists deliveries newest first', async (t) => {
      const { store } = await open(t);
      const endpoint = await subscribe(store);
      for (const name of ['a', 'b', 'c']) await store.plants.insert({ name });
      await fanOutAll(store);
      const q = store.webhookQueue;
      assert.equal(await q.depth(), 3, 'three pending');
      const [a, b, c] = await q.claim(FAR, 1000, 10);
      assert.ok(a && b && c);
      // b before a: a delivery after a failure would make a due at once (the receiver is back).
      assert.ok(await q.finish(b.id, b.claimedUntil, attempt(204, at(2)), { kind: 'delivered' }));
      assert.ok(
        await q.finish(a.id, a.claimedUntil, attempt(500, at(1)), { kind: 'retry', at: at(5000) }),
      );
      assert.ok(await q.finish(c.id, c.claimedUntil, attempt(null, at(3)), { kind: 'failed' }));
      assert.equal((await q.nextDue(at(3)))?.getTime(), at(5000).getTime());
      assert.equal(await q.depth(), 1, 'only the one to retry is pending');
      assert.deepEqual(await q.claim(at(4999), 1000, 10), []);
      const [retried] = await q.claim(at(5000), 1000, 10);
      assert.equal(retried?.id, a.id);
      assert.equal(retried?.attempt, 2);
      assert.ok(
        await q.finish(a.id, retried!.claimedUntil, attempt(200, at(5001)), { kind: 'delivered' }),
      );

      const list = await store.webhooks.deliveries({ endpointId: endpoint.id, limit: 10 });
      assert.deepEqual(
        list.map((d) => [d.id, d.status]),
        [
          [c.id, 'failed'],
          [b.id, 'delivered'],
          [a.id, 'delivered'],
        ],
      );
      assert.deepEqual(
        list[2]!.attempts.map((x) => [x.at.getTime(), x.httpStatus, x.responseExcerpt]),
        [
          [at(1).getTime(), 500, 'ok\uFFFD'],
          [at(5001).getTime(), 200, 'ok\uFFFD'],
        ],
      );
      assert.deepEqual(list[0]!.attempts[0], {
        at: at(3),
        durationMs: 12,
        httpStatus: null,
        error: 'connect ECONNREFUSED',
        responseExcerpt: '',
      });
      const page = await store.webhooks.deliveries({
        endpointId: endpoint.id,
        limit: 1,
        after: c.id,
      });
      assert.deepEqual(
        page.map((d) => d.id),
        [b.id],
      );
      const failed = await store.webhooks.deliveries({
        endpointId: endpoint.id,
        limit: 10,
        status: 'failed',
      });
      assert.deepEqual(
        failed.map((d) => d.id),
        [c.id],
      );

      let wakes = 0;
      q.onMessages(() => (wakes += 1));
      assert.equal(await store.webhooks.retry(endpoint.id + 1n, c.id, at(9000)), false);
      assert.equal(await store.webhooks.retry(endpoint.id, c.id, at(9000)), true);
      assert.equal(wakes, 1);
      const [manual] = await q.claim(at(9000), 1000, 10);
      assert.equal(manual?.webhookId, c.webhookId);
      assert.equal(manual?.attempt, 2);

      assert.equal(await q.purge(at(4)), 1, 'b was delivered at 2');
      const left = await store.webhooks.deliveries({ endpointId: endpoint.id, limit: 10 });
      assert.deepEqual(
        left.map((d) => d.id),
        [c.id, a.id],
      );
    });

    it('410 disables the endpoint and keeps its pending messages; re-enabling resumes', async (t) => {
      const { store } = await open(t);
      const endpoint = await subscribe(store);
      await store.plants.insert({ name: 'a' });
      await store.plants.insert({ name: 'b' });
      await fanOutAll(store);
      const [a] = await store.webhookQueue.claim(FAR, 1000, 1);
      assert.ok(
        await store.webhookQueue.finish(a!.id, a!.claimedUntil, attempt(410), { kind: 'gone' }),
      );
      const disabled = await store.webhooks.get(endpoint.id);
      assert.equal(disabled?.enabled, false);
      assert.equal(disabled?.disabledReason, 'gone');
      // Disabling it again by a request keeps why it was disabled first.
      await store.webhooks.update(endpoint.id, { enabled: false }, new Date());
      assert.equal((await store.webhooks.get(endpoint.id))?.disabledReason, 'gone');
      assert.deepEqual(await store.webhookQueue.claim(FAR, 1000, 10), []);
      assert.equal(await store.webhookQueue.nextDue(T0), null);
      await store.plants.insert({ name: 'c' });
      assert.equal(await fanOutAll(store), 0, 'c: no enabled endpoint subscribes');
      const enabled = await store.webhooks.update(endpoint.id, { enabled: true }, new Date());
      assert.equal(enabled?.disabledReason, undefined);
      const resumed = await store.webhookQueue.claim(FAR, 1000, 10);
      assert.equal(resumed.length, 2, 'a and b; c came while the endpoint was disabled');
      assert.equal(resumed[0]!.id, a!.id);
    });

    it('disables endpoints that have only failed since before a time', async (t) => {
      const { store } = await open(t);
      const failing = await subscribe(store);
      const healthy = await store.webhooks.create({
        url: 'https://ok.example/',
        events: ['plant.created'],
        secret: 'whsec_x',
        at: T0,
      });
      await store.plants.insert({ name: 'a' });
      await fanOutAll(store);
      const q = store.webhookQueue;
      for (const m of await q.claim(FAR, 1000, 10)) {
        const ok = m.endpoint.id === healthy.id;
        await q.finish(m.id, m.claimedUntil, attempt(ok ? 500 : 500, at(0)), {
          kind: 'retry',
          at: at(10),
        });
      }
      for (const m of await q.claim(FAR, 1000, 10)) {
        const ok = m.endpoint.id === healthy.id;
        await q.finish(
          m.id,
          m.claimedUntil,
          attempt(ok ? 200 : 500, at(20)),
          ok ? { kind: 'delivered' } : { kind: 'retry', at: at(30) },
        );
      }
      assert.equal(await q.disableFailing(at(-1), at(40)), 0, 'failing since 0, not before -1');
      assert.equal(await q.disableFailing(at(0), at(40)), 1);
      assert.equal((await store.webhooks.get(failing.id))?.enabled, false);
      assert.equal((await store.webhooks.get(failing.id))?.disabledReason, 'failing');
      assert.equal((await store.webhooks.get(healthy.id))?.enabled, true);
    });

    // On PostgreSQL the attempts that end while one is being recorded are recorded together,
    // in one statement (webhook-finish.ts): each must come out as if recorded one by one.
    it('attempts that end at once: each recorded, each endpoint left as after them in turn', async (t) => {
      const { store } = await open(t);
      const steady = await subscribe(store);
      const back = await subscribe(store);
      const down = await subscribe(store);
      for (const name of ['a', 'b', 'c']) await store.plants.insert({ name });
      await fanOutAll(store);
      const q = store.webhookQueue;
      const claimed = await q.claim(FAR, 1000, 20);
      const of = (endpoint: { id: bigint }) => claimed.filter((m) => m.endpoint.id === endpoint.id);
      const [s1, s2, s3] = of(steady);
      const [b1, b2, b3] = of(back);
      const [d1, d2, d3] = of(down);
      assert.ok(s1 && s2 && s3 && b1 && b2 && b3 && d1 && d2 && d3);
      const stale = new Date(s3.claimedUntil.getTime() - 1);
      let wakes = 0;
      q.onMessages(() => (wakes += 1));
      // Not awaited in turn: the first is recorded alone, the rest together while it is.
      const answers = await Promise.all([
        q.finish(s1.id, s1.claimedUntil, attempt(204, at(1)), { kind: 'delivered' }),
        q.finish(b1.id, b1.claimedUntil, attempt(500, at(10)), { kind: 'retry', at: at(9000) }),
        q.finish(b2.id, b2.claimedUntil, attempt(204, at(20)), { kind: 'delivered' }),
        q.finish(d1.id, d1.claimedUntil, attempt(204, at(10)), { kind: 'delivered' }),
        q.finish(d2.id, d2.claimedUntil, attempt(500, at(20)), { kind: 'retry', at: at(9000) }),
        q.finish(d3.id, d3.claimedUntil, attempt(null, at(30)), { kind: 'failed' }),
        q.finish(s2.id, s2.claimedUntil, attempt(204, at(2)), { kind: 'delivered' }),
        q.finish(s3.id, stale, attempt(204, at(3)), { kind: 'delivered' }),
        q.finish(b3.id, b3.claimedUntil, attempt(429, at(30)), { kind: 'retry', at: at(9000) }),
        q.finish(s3.id, s3.claimedUntil, attempt(204, at(4)), { kind: 'delivered' }),
      ]);
      assert.deepEqual(answers, [true, true, true, true, true, true, true, false, true, true]);
      const statuses = async (endpoint: { id: bigint }) =>
        (await store.webhooks.deliveries({ endpointId: endpoint.id, limit: 10 }))
          .map((d) => [d.id, d.status, d.attempts.map((x) => x.httpStatus)])
          .reverse();
      assert.deepEqual(await statuses(steady), [
        [s1.id, 'delivered', [204]],
        [s2.id, 'delivered', [204]],
        [s3.id, 'delivered', [204]],
      ]);
      assert.deepEqual(await statuses(down), [
        [d1.id, 'delivered', [204]],
        [d2.id, 'pending', [500]],
        [d3.id, 'failed', [null]],
      ]);
      // `back` failed, was delivered to, then failed again: the retry of the failure before
      // the delivery is due now rather than at 9000 (and a wake-up says so); that of the one
      // after keeps its time.
      assert.ok(wakes >= 1, 'the recovery wakes the dispatcher');
      const due = await q.claim(at(100), 1000, 20);
      assert.deepEqual(
        due.map((m) => m.id),
        [b1.id],
        'b1 due at once; b3 and d2 wait for 9000',
      );
      // `down` has failed since 20 (its delivery at 10 came before), `back` since 30; `steady`
      // never failed.
      assert.equal(await q.disableFailing(at(19), at(40)), 0);
      assert.equal(await q.disableFailing(at(20), at(40)), 1);
      assert.equal((await store.webhooks.get(down.id))?.enabled, false);
      assert.equal((await store.webhooks.get(back.id))?.enabled, true);
      assert.equal(await q.disableFailing(at(30), at(40)), 1);
      assert.equal((await store.webhooks.get(back.id))?.enabled, false);
      assert.equal((await store.webhooks.get(steady.id))?.enabled, true);
    });

    // Every attempt recorded, once, whichever process records it and in whatever order (the
    // order of the locks themselves is the next PostgreSQL test's).
    it('two stores recording attempts of the same endpoints at once, beside fan-outs', async (t) => {
      const { store, another } = await open(t);
      const other = await another();
      const endpoints = [];
      for (let i = 0; i < 12; i++) endpoints.push(await subscribe(store));
      for (let i = 0; i < 10; i++) await store.plants.insert({ name: `p${i}` });
      await fanOutAll(store);
      const mine = await store.webhookQueue.claim(FAR, 60_000, 60);
      const theirs = await other.webhookQueue.claim(FAR, 60_000, 60);
      assert.equal(mine.length + theirs.length, 120);
      const byEndpoint = (list: typeof mine, descending: boolean) =>
        [...list].sort((a, b) =>
          Number(descending ? b.endpoint.id - a.endpoint.id : a.endpoint.id - b.endpoint.id),
        );
      // Failures and deliveries in turn, so that every batch changes its endpoints' rows.
      const record = (s: Store, list: typeof mine) =>
        list.map((m, i) =>
          s.webhookQueue.finish(
            m.id,
            m.claimedUntil,
            attempt(i % 2 ? 204 : 500, at(i)),
            i % 2 ? { kind: 'delivered' } : { kind: 'retry', at: at(9000) },
          ),
        );
      const more = async (s: Store) => {
        for (let i = 0; i < 5; i++) await s.plants.insert({ name: `q${i}` });
        await fanOutAll(s);
      };
      const [answers] = await Promise.all([
        Promise.all([
          ...record(store, byEndpoint(mine, false)),
          ...record(other, byEndpoint(theirs, true)),
        ]),
        more(store),
        more(other),
      ]);
      assert.equal(answers.filter(Boolean).length, 120);
      let attempts = 0;
      for (const endpoint of endpoints) {
        const list = await store.webhooks.deliveries({ endpointId: endpoint.id, limit: 100 });
        attempts += list.reduce((sum, d) => sum + d.attempts.length, 0);
      }
      assert.equal(attempts, 120);
    });

    it('signs with the previous secret beside the new one until the overlap ends', async (t) => {
      const { store } = await open(t);
      const endpoint = await subscribe(store);
      const now = Date.now();
      const ends = new Date(now + 3_600_000);
      await store.webhooks.rotateSecret(endpoint.id, 'whsec_second', new Date(now), ends);
      await store.plants.insert({ name: 'a' });
      await fanOutAll(store);
      const [during] = await store.webhookQueue.claim(new Date(ends.getTime() - 1), 1, 1);
      assert.deepEqual(during?.endpoint.secrets, ['whsec_second', 'whsec_first']);
      const [after] = await store.webhookQueue.claim(ends, 1, 1);
      assert.deepEqual(after?.endpoint.secrets, ['whsec_second']);
    });

    it('two stores on one database never claim the same message at once', async (t) => {
      const { store, another } = await open(t);
      const other = await another();
      await subscribe(store);
      await Promise.all(
        Array.from({ length: 60 }, (_, i) => store.plants.insert({ name: `p${i}` })),
      );
      await fanOutAll(store);
      const now = new Date(Date.now() + 1000);
      const rounds = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          (i % 2 ? store : other).webhookQueue.claim(now, 60_000, 7),
        ),
      );
      const ids = rounds.flat().map((m) => m.id);
      assert.equal(ids.length, 60);
      assert.equal(new Set(ids).size, 60);
    });

    it('deleting an endpoint deletes its messages', async (t) => {
      const { store } = await open(t);
      const endpoint = await subscribe(store);
      await store.plants.insert({ name: 'a' });
      await fanOutAll(store);
      await store.webhooks.delete(endpoint.id);
      assert.deepEqual(await store.webhookQueue.claim(FAR, 1000, 10), []);
      assert.deepEqual(await store.webhooks.deliveries({ endpointId: endpoint.id, limit: 10 }), []);
    });
  });
}

forEachBackend((backend) =>
  webhookContract(async (t) => {
    const db = await backend.fresh(t);
    // SQLite without the fsync of each commit; PostgreSQL with room for concurrent claims.
    const options = db.dialect === 'sqlite' ? { durability: 'process' as const } : { poolSize: 4 };
    const another = () => db.open(options);
    return { store: await another(), another };
  }),
);

if (!POSTGRES_SKIP) {
  it('postgres: a batch of attempt records locks its endpoints before any message', async (t) => {
    const url = await freshOwnDatabase(t);
    const store = await openPostgresStore({ url, poolSize: 2 });
    try {
      await locksEndpointsFirst(store, url);
    } finally {
      await store.close();
    }
  });

  it('postgres: a batch of records that fails is written again one by one', async (t) => {
    const url = await freshOwnDatabase(t);
    const store = await openPostgresStore({ url, poolSize: 2 });
    try {
      await subscribe(store);
      for (const name of ['a', 'b', 'c']) await store.plants.insert({ name });
      await fanOutAll(store);
      const q = store.webhookQueue;
      const [a, b, c] = await q.claim(FAR, 60_000, 10);
      assert.ok(a && b && c);
      const delivered = { kind: 'delivered' } as const;
      // A duration no integer column holds fails its statement; the first is written alone,
      // the other two together, then one by one.
      const settled = await Promise.allSettled([
        q.finish(a.id, a.claimedUntil, attempt(204, at(1)), delivered),
        q.finish(b.id, b.claimedUntil, { ...attempt(204, at(2)), durationMs: 2 ** 40 }, delivered),
        q.finish(c.id, c.claimedUntil, attempt(204, at(3)), delivered),
      ]);
      assert.deepEqual(
        settled.map((s) => s.status),
        ['fulfilled', 'rejected', 'fulfilled'],
      );
      assert.equal(await q.depth(), 1, 'b is still pending, leased');
    } finally {
      await store.close();
    }
  });

  it('postgres: a fan-out that writes messages NOTIFYs plantstore_webhooks in its commit; a write does not', async (t) => {
    // Its own database: the other tests' fan-outs, in their schemas of the shared one, notify
    // the same channel.
    const url = await freshOwnDatabase(t);
    const store = await openPostgresStore({ url, poolSize: 2 });
    const listener = new pg.Client({ connectionString: url });
    // Closed here, not in t.after: the database's own after hook, registered first, runs
    // first, and would cut these connections off.
    try {
      await listener.connect();
      await notifies(store, listener);
    } finally {
      await listener.end();
      await store.close();
    }
  });
}

/**
 * A batch of records takes its endpoints' locks, in id order, before it writes any message
 * (webhook-finish.ts), as the fan-out does: two batches, or a batch and a fan-out, then wait
 * for each other instead of deadlocking. Here a session holds the second endpoint; the batch
 * must wait for it without having locked the first endpoint's message yet.
 */
async function locksEndpointsFirst(store: Store, url: string): Promise<void> {
  const first = await subscribe(store);
  const second = await subscribe(store);
  const third = await subscribe(store);
  await store.plants.insert({ name: 'a' });
  await fanOutAll(store);
  const claimed = await store.webhookQueue.claim(FAR, 60_000, 10);
  const of = (endpoint: { id: bigint }) => claimed.find((m) => m.endpoint.id === endpoint.id)!;
  const holder = new pg.Client({ connectionString: url });
  const watcher = new pg.Client({ connectionString: url });
  await holder.connect();
  await watcher.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR UPDATE', [
      second.id.toString(),
    ]);
    const finish = (endpoint: { id: bigint }) => {
      const m = of(endpoint);
      return store.webhookQueue.finish(m.id, m.claimedUntil, attempt(500, at(1)), {
        kind: 'retry',
        at: at(9000),
      });
    };
    // The third's is written alone at once; the first's and the second's together after it.
    const answers = Promise.all([finish(third), finish(first), finish(second)]);
    for (;;) {
      const { rows } = await watcher.query(
        `SELECT 1 FROM pg_stat_activity
         WHERE wait_event_type = 'Lock' AND query LIKE 'WITH input AS%'`,
      );
      if (rows.length > 0) break;
      await new Promise((resolve) => setImmediate(resolve));
    }
    // Its message is not locked yet: NOWAIT would fail (55P03) if the batch held it.
    await holder.query('SELECT 1 FROM webhook_messages WHERE id = $1 FOR UPDATE NOWAIT', [
      of(first).id.toString(),
    ]);
    await holder.query('ROLLBACK');
    assert.deepEqual(await answers, [true, true, true]);
  } finally {
    await holder.end();
    await watcher.end();
  }
}

/**
 * One NOTIFY for a fan-out that writes messages and for a retry; none for a write (its own
 * process's fan-out hears of it in the process) nor for a fan-out that writes none.
 */
async function notifies(store: Store, listener: pg.Client): Promise<void> {
  await listener.query('LISTEN plantstore_webhooks');
  const heard: string[] = [];
  listener.on('notification', (n) => heard.push(n.channel));
  const endpoint = await subscribe(store);
  await store.plants.update(1n, { name: 'nobody' });
  await store.plants.insert({ name: 'a' });
  // The notification arrives after the commit; a round trip on the listener's own
  // connection is answered after the notifications queued before it.
  await listener.query('SELECT 1');
  assert.deepEqual(heard, [], 'a write notifies no one');
  await fanOutAll(store);
  await listener.query('SELECT 1');
  assert.deepEqual(heard, ['plantstore_webhooks'], 'the fan-out, once; the empty one after it not');
  const [message] = await store.webhooks.deliveries({ endpointId: endpoint.id, limit: 1 });
  await store.webhooks.retry(endpoint.id, message!.id, new Date());
  await listener.query('SELECT 1');
  assert.deepEqual(heard, ['plantstore_webhooks', 'plantstore_webhooks']);
}
