import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { plantPayload, type WebhookEvent } from '../../src/core/webhooks/events.js';
import { PlantExistsError, type Store, WebhookEndpointLimitError } from '../../src/store/store.js';
import { type Backend, forEachBackend } from '../helpers/backends.js';
import { fanOutAll } from '../helpers/fan-out.js';

// A plant write records its event once, whatever the number of endpoints, and the fan-out
// makes the messages afterwards, a bounded batch at a time (the finding: 5,000 endpoints made
// every create write 5,000 rows). On both databases, counted in rows on a connection of the
// test's own.

interface EventsDatabase {
  store: Store;
  /** A second store on the same database: another process, as far as the database knows. */
  another(): Promise<Store>;
  /** The rows a query answers, on the test's own connection. */
  rows<R>(sql: string): Promise<R[]>;
}

/** A fresh database of `backend` with a store on it, as the tests below use it. */
async function eventsDatabase(t: TestContext, backend: Backend): Promise<EventsDatabase> {
  const db = await backend.fresh(t);
  // SQLite without the fsync of each commit; PostgreSQL with room for concurrent fan-outs.
  const options = db.dialect === 'sqlite' ? { durability: 'process' as const } : { poolSize: 4 };
  const another = () => db.open(options);
  return { store: await another(), another, rows: db.query };
}

const subscribe = (store: Store, events: WebhookEvent[] = ['plant.created'], max?: number) =>
  store.webhooks.create(
    { url: 'https://example.com/hook', events, secret: 'whsec_x', at: new Date() },
    max,
  );

/** `n` endpoints subscribed to `plant.created`, created in batches (one commit each). */
async function subscribeMany(store: Store, n: number): Promise<void> {
  for (let done = 0; done < n; done += 100) {
    await Promise.all(Array.from({ length: Math.min(100, n - done) }, () => subscribe(store)));
  }
}

async function counts(db: EventsDatabase): Promise<{ events: number; messages: number }> {
  const [row] = await db.rows<{ events: number | bigint; messages: number | bigint }>(
    `SELECT (SELECT count(*) FROM webhook_events) AS events,
       (SELECT count(*) FROM webhook_messages) AS messages`,
  );
  return { events: Number(row!.events), messages: Number(row!.messages) };
}

forEachBackend((backend) => {
  describe('webhook events', () => {
    it('a write with 1,000 endpoints records one event and no message; the fan-out writes 1,000, at most 300 at a time', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      await subscribeMany(store, 1000);
      const plant = await store.plants.insert({ name: 'Fern', tag: 'shade' });
      assert.deepEqual(await counts(db), { events: 1, messages: 0 }, 'in the write: one row');

      const steps = [];
      for (;;) {
        const step = await store.webhookEvents.fanOut(300);
        if (step.events === 0) break;
        steps.push(step);
      }
      assert.deepEqual(steps, [
        { events: 1, finished: 0, messages: 300 },
        { events: 1, finished: 0, messages: 300 },
        { events: 1, finished: 0, messages: 300 },
        { events: 1, finished: 1, messages: 100 },
      ]);
      assert.deepEqual(await counts(db), { events: 0, messages: 1000 });
      const [row] = await db.rows<{ endpoints: number | bigint; payloads: number | bigint }>(
        `SELECT count(DISTINCT endpoint_id) AS endpoints, count(DISTINCT payload) AS payloads
         FROM webhook_messages`,
      );
      assert.deepEqual([Number(row!.endpoints), Number(row!.payloads)], [1000, 1]);
      const [message] = await db.rows<{ payload: string }>(
        'SELECT payload FROM webhook_messages LIMIT 1',
      );
      assert.equal(message!.payload, plantPayload(plant));
    });

    it('an event goes to the endpoints created before its write that are enabled and subscribed at the fan-out', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      const a = await subscribe(store);
      const disabled = await subscribe(store);
      const resubscribed = await subscribe(store, ['plant.deleted']);
      await store.plants.insert({ name: 'Fern' });
      const later = await subscribe(store);
      await store.webhooks.update(disabled.id, { enabled: false }, new Date());
      await store.webhooks.update(resubscribed.id, { events: ['plant.created'] }, new Date());
      assert.equal(await fanOutAll(store), 2);
      const rows = await db.rows<{ endpoint_id: bigint | number }>(
        'SELECT endpoint_id FROM webhook_messages ORDER BY endpoint_id',
      );
      assert.deepEqual(
        rows.map((r) => BigInt(r.endpoint_id)),
        [a.id, resubscribed.id],
        `not ${disabled.id} (disabled since), nor ${later.id} (created after the write)`,
      );
    });

    it('no event when no enabled endpoint subscribes, nor for a write that fails', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      await subscribe(store, ['plant.deleted']);
      const off = await subscribe(store);
      await store.webhooks.update(off.id, { enabled: false }, new Date());
      await store.plants.insert({ id: 1n, name: 'Fern' });
      assert.deepEqual(await counts(db), { events: 0, messages: 0 });
      await subscribe(store);
      await assert.rejects(store.plants.insert({ id: 1n, name: 'again' }), PlantExistsError);
      assert.deepEqual(await counts(db), { events: 0, messages: 0 });
      assert.ok(await store.plants.delete(1n));
      assert.deepEqual(await counts(db), { events: 1, messages: 0 });
    });

    it('the events of a store that stopped before its fan-out are fanned out by the next one', async (t) => {
      const db = await eventsDatabase(t, backend);
      await subscribe(db.store);
      for (const name of ['a', 'b', 'c']) await db.store.plants.insert({ name });
      await db.store.close();
      assert.deepEqual(await counts(db), { events: 3, messages: 0 });
      const next = await db.another();
      assert.equal(await fanOutAll(next), 3);
      assert.deepEqual(await counts(db), { events: 0, messages: 3 });
    });

    it('two fan-outs at once neither lose nor double a message', async (t) => {
      const db = await eventsDatabase(t, backend);
      const other = await db.another();
      await subscribeMany(db.store, 10);
      await Promise.all(
        Array.from({ length: 200 }, (_, i) => db.store.plants.insert({ name: `p${i}` })),
      );
      // 7 messages a batch: most events are cut off, and taken up again where they stopped.
      const written = await Promise.all([fanOutAll(db.store, 7), fanOutAll(other, 7)]);
      assert.equal(written[0] + written[1], 2000);
      assert.ok(written.every((n) => n > 0) || backend.dialect === 'sqlite', `${written}`);
      assert.deepEqual(await counts(db), { events: 0, messages: 2000 });
      const [row] = await db.rows<{ n: number | bigint }>(
        'SELECT count(*) AS n FROM (SELECT DISTINCT endpoint_id, payload FROM webhook_messages) d',
      );
      assert.equal(Number(row!.n), 2000);
    });

    it('creates at most maxEndpoints endpoints, also when creates race in two stores', async (t) => {
      const db = await eventsDatabase(t, backend);
      const other = await db.another();
      await subscribe(db.store, undefined, 2);
      await subscribe(db.store, undefined, 2);
      await assert.rejects(subscribe(db.store, undefined, 2), (error: unknown) => {
        assert.ok(error instanceof WebhookEndpointLimitError);
        assert.equal(error.max, 2);
        return true;
      });
      // Three races, each of 40 creates from two stores at once for 10 places.
      for (const max of [12, 22, 32]) {
        const outcomes = await Promise.allSettled(
          Array.from({ length: 40 }, (_, i) => subscribe(i % 2 ? other : db.store, undefined, max)),
        );
        const refused = outcomes.filter((o) => o.status === 'rejected');
        assert.equal(outcomes.length - refused.length, 10, `created for a limit of ${max}`);
        for (const outcome of refused) {
          assert.ok(outcome.reason instanceof WebhookEndpointLimitError, String(outcome.reason));
        }
        const [row] = await db.rows<{ n: number | bigint }>(
          'SELECT count(*) AS n FROM webhook_endpoints',
        );
        assert.equal(Number(row!.n), max);
      }
    });
  });
});
