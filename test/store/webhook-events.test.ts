import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { plantPayload, type WebhookEvent } from '../../src/core/webhooks/events.js';
import {
  type FanOutStep,
  PlantExistsError,
  type Store,
  WebhookEndpointLimitError,
} from '../../src/store/store.js';
import { MESSAGES_PER_ENDPOINT } from '../../src/store/webhook-log.js';
import { type Backend, forEachBackend } from '../helpers/backends.js';
import { fanOutAll } from '../helpers/fan-out.js';

// A plant write records nothing for the webhooks, whatever the number of endpoints: its audit
// entry is the event, and the fan-out gives each endpoint the events above its position in
// that log, a bounded batch at a time and at most MESSAGES_PER_ENDPOINT pending (the finding:
// 5,000 endpoints made every create write 5,000 rows; then 1,000 endpoints that never
// answered made creates 0.60x as fast). On both databases, counted in rows on a connection of
// the test's own.

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

async function count(db: EventsDatabase, where = 'true'): Promise<number> {
  const [row] = await db.rows<{ n: number | bigint }>(
    `SELECT count(*) AS n FROM webhook_messages WHERE ${where}`,
  );
  return Number(row!.n);
}

const endpointIds = async (db: EventsDatabase) =>
  (
    await db.rows<{ endpoint_id: bigint | number }>(
      'SELECT endpoint_id FROM webhook_messages ORDER BY endpoint_id, id',
    )
  ).map((row) => BigInt(row.endpoint_id));

/** What a fan-out did, without how long it waited. */
const did = ({ endpoints, messages, room }: FanOutStep) => ({ endpoints, messages, room });

/** An attempt ended now with `httpStatus`. */
const attempt = (httpStatus: number) => ({
  at: new Date(),
  durationMs: 1,
  httpStatus,
  error: null,
  responseExcerpt: '',
});

/**
 * Ends up to `n` of the messages due now as delivered, as the dispatcher would; answers how
 * many.
 */
async function deliver(store: Store, n: number): Promise<number> {
  const claimed = await store.webhookQueue.claim(new Date(), 60_000, n);
  for (const message of claimed) {
    const delivered = { kind: 'delivered' } as const;
    assert.ok(
      await store.webhookQueue.finish(message.id, message.claimedUntil, attempt(204), delivered),
    );
  }
  return claimed.length;
}

forEachBackend((backend) => {
  describe('webhook events', () => {
    it('a write with 1,000 endpoints writes no row for them; the fan-out writes their 1,000 messages, 100 at a time', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      await subscribeMany(store, 1000);
      const plant = await store.plants.insert({ name: 'Fern', tag: 'shade' });
      assert.equal(await count(db), 0, 'in the write: no message');

      const steps = [];
      for (;;) {
        // A tenth of 1,000 messages' endpoints a fan-out (endpointsPerFanOut).
        const step = await store.webhookEvents.fanOut(1000);
        if (step.endpoints === 0) break;
        steps.push(did(step));
      }
      assert.deepEqual(
        steps,
        Array.from({ length: 10 }, () => ({ endpoints: 100, messages: 100, room: true })),
      );
      const [row] = await db.rows<{ endpoints: number | bigint; payloads: number | bigint }>(
        `SELECT count(DISTINCT endpoint_id) AS endpoints, count(DISTINCT payload) AS payloads
         FROM webhook_messages`,
      );
      assert.deepEqual([Number(row!.endpoints), Number(row!.payloads)], [1000, 1]);
      const [message] = await db.rows<{ payload: string; event_type: string }>(
        'SELECT payload, event_type FROM webhook_messages LIMIT 1',
      );
      assert.deepEqual(
        [message!.payload, message!.event_type],
        [plantPayload(plant), 'plant.created'],
      );
    });

    it('each endpoint behind gets its part of a fan-out, the one read last too', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      await subscribeMany(store, 60);
      await Promise.all(
        Array.from({ length: 20 }, (_, j) => store.plants.insert({ name: `p${j}` })),
      );
      // 1,000 messages, 60 endpoints behind: 16 or 17 each. Given whole, in the order read, 50
      // would have had 20 and 10 none; at 17 each, the 60th none; at 16 each, 40 unused.
      assert.deepEqual(did(await store.webhookEvents.fanOut(1000)), {
        endpoints: 60,
        messages: 1000,
        room: true,
      });
      const [row] = await db.rows<{
        endpoints: number | bigint;
        least: number | bigint;
        most: number | bigint;
      }>(
        `SELECT count(*) AS endpoints, min(n) AS least, max(n) AS most FROM
           (SELECT endpoint_id, count(*) AS n FROM webhook_messages GROUP BY endpoint_id) e`,
      );
      assert.deepEqual([row!.endpoints, row!.least, row!.most].map(Number), [60, 16, 17]);
      assert.equal(await fanOutAll(store), 60 * 20 - 1000, 'the rest, in the next fan-out');
    });

    it('what endpoints behind take less of goes to the others: a busy one beside 99 idle', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      // 99 endpoints subscribed to deletes only, as far behind as the busy one, whose 64
      // messages of room a fixed equal part (1,000 among 100) cut to 10.
      for (let done = 0; done < 99; done += 33) {
        await Promise.all(Array.from({ length: 33 }, () => subscribe(store, ['plant.deleted'])));
      }
      const busy = await subscribe(store);
      for (let done = 0; done < 100; done += 25) {
        await Promise.all(
          Array.from({ length: 25 }, (_, j) => store.plants.insert({ name: `p${done + j}` })),
        );
      }
      assert.deepEqual(did(await store.webhookEvents.fanOut(1000)), {
        endpoints: 100,
        messages: MESSAGES_PER_ENDPOINT,
        room: true,
      });
      assert.equal(await count(db, `endpoint_id = ${busy.id}`), MESSAGES_PER_ENDPOINT);
    });

    it('endpoints behind that take nothing move on, also after others filled the fan-out', async (t) => {
      const { store } = await eventsDatabase(t, backend);
      await Promise.all(Array.from({ length: 20 }, () => subscribe(store)));
      const creates = (n: number) =>
        Promise.all(Array.from({ length: n }, (_, j) => store.plants.insert({ name: `p${j}` })));
      await creates(35);
      await creates(35);
      // Less far behind, so read after the 20, whose 64 each are more than the 1,000.
      await Promise.all(Array.from({ length: 40 }, () => subscribe(store, ['plant.deleted'])));
      await creates(10);
      assert.deepEqual(did(await store.webhookEvents.fanOut(1000)), {
        endpoints: 60,
        messages: 1000,
        room: true,
      });
    });

    it('an endpoint gets the writes after its creation, of its types, while enabled: re-enabled, what it missed', async (t) => {
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
      assert.deepEqual(
        await endpointIds(db),
        [a.id, resubscribed.id],
        `not ${disabled.id} (disabled), nor ${later.id} (created after the write)`,
      );
      await store.webhooks.update(disabled.id, { enabled: true }, new Date());
      assert.equal(await fanOutAll(store), 1);
      assert.deepEqual(await endpointIds(db), [a.id, disabled.id, resubscribed.id]);
    });

    it('no message for a type no endpoint subscribes to, nor for a write that fails', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      await subscribe(store, ['plant.deleted']);
      await store.plants.insert({ id: 1n, name: 'Fern' });
      assert.equal(await fanOutAll(store), 0);
      await assert.rejects(store.plants.insert({ id: 1n, name: 'again' }), PlantExistsError);
      assert.equal(await fanOutAll(store), 0);
      assert.ok(await store.plants.delete(1n));
      assert.equal(await fanOutAll(store), 1);
      assert.equal(await count(db, "event_type = 'plant.deleted'"), 1);
    });

    it('an endpoint holds at most MESSAGES_PER_ENDPOINT pending; it gets the next as they end', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      await subscribe(store);
      const writes = MESSAGES_PER_ENDPOINT + 36;
      for (let i = 0; i < writes; i += 20) {
        await Promise.all(
          Array.from({ length: 20 }, (_, j) => store.plants.insert({ name: `p${i + j}` })),
        );
      }
      assert.equal(await fanOutAll(store), MESSAGES_PER_ENDPOINT);
      const full = await store.webhookEvents.fanOut(1000);
      assert.deepEqual(
        did(full),
        { endpoints: 0, messages: 0, room: false },
        'nothing, and no room',
      );
      await deliver(store, 30);
      assert.equal(await fanOutAll(store), 30);
      await deliver(store, 1000);
      assert.equal(await fanOutAll(store), writes - MESSAGES_PER_ENDPOINT - 30);
      const [row] = await db.rows<{ n: number | bigint; names: number | bigint }>(
        `SELECT count(*) AS n, count(DISTINCT payload) AS names FROM webhook_messages`,
      );
      assert.deepEqual([Number(row!.n), Number(row!.names)], [writes, writes], 'each once');
    });

    it('a stalled endpoint gets one message more; its delivery makes the others due at once', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      await subscribe(store);
      const writes = MESSAGES_PER_ENDPOINT + 6;
      for (let i = 0; i < writes; i++) await store.plants.insert({ name: `p${i}` });
      assert.equal(await fanOutAll(store), MESSAGES_PER_ENDPOINT);
      // The receiver is down: every message fails and waits an hour for its next try.
      const hour = { kind: 'retry', at: new Date(Date.now() + 3_600_000) } as const;
      const claimed = await store.webhookQueue.claim(new Date(), 60_000, 1000);
      assert.equal(claimed.length, MESSAGES_PER_ENDPOINT);
      for (const message of claimed) {
        assert.ok(
          await store.webhookQueue.finish(message.id, message.claimedUntil, attempt(503), hour),
        );
      }
      // A process that has not looked for stalled endpoints yet (a look at most a minute).
      const other = await db.another();
      assert.equal(await fanOutAll(other), 1, 'the probe');
      assert.equal(await fanOutAll(other), 0, 'one probe a look');
      assert.equal(await deliver(store, 1000), 1, 'the probe alone is due');
      assert.equal(await deliver(store, 1000), MESSAGES_PER_ENDPOINT, 'then the others, at once');
      assert.equal(await fanOutAll(store), writes - MESSAGES_PER_ENDPOINT - 1);
    });

    it('an enabled endpoint gets the events below the horizon; enabled again, it resumes there', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      await subscribe(store);
      for (const name of ['a', 'b', 'c']) await store.plants.insert({ name });
      await store.events.settle?.();
      assert.equal(await store.events.prune(new Date(Date.now() + 60_000), 10), 3);
      assert.equal(await fanOutAll(store), 3, 'enabled: every event the audit trail keeps');
    });

    it('an endpoint enabled again resumes at the horizon of the log at the furthest back', async (t) => {
      const db = await eventsDatabase(t, backend);
      const { store } = db;
      const endpoint = await subscribe(store);
      await store.webhooks.update(endpoint.id, { enabled: false }, new Date());
      for (const name of ['a', 'b', 'c']) await store.plants.insert({ name });
      await store.events.settle?.();
      assert.equal(await store.events.prune(new Date(Date.now() + 60_000), 10), 3);
      await store.plants.insert({ name: 'd' });
      await store.webhooks.update(endpoint.id, { enabled: true }, new Date());
      assert.equal(await fanOutAll(store), 1);
      assert.deepEqual(
        (await db.rows<{ payload: string }>('SELECT payload FROM webhook_messages')).map(
          (r) => JSON.parse(r.payload).name,
        ),
        ['d'],
      );
    });

    it('the writes of a store that stopped before its fan-out are fanned out by the next one', async (t) => {
      const db = await eventsDatabase(t, backend);
      await subscribe(db.store);
      for (const name of ['a', 'b', 'c']) await db.store.plants.insert({ name });
      await db.store.close();
      assert.equal(await count(db), 0);
      const next = await db.another();
      assert.equal(await fanOutAll(next), 3);
      assert.equal(await count(db), 3);
    });

    it('two fan-outs at once neither lose nor double a message', async (t) => {
      const db = await eventsDatabase(t, backend);
      const other = await db.another();
      await subscribeMany(db.store, 10);
      await Promise.all(
        Array.from({ length: 60 }, (_, i) => db.store.plants.insert({ name: `p${i}` })),
      );
      // Two endpoints a batch (60 messages each, 64 at most): both take those furthest behind,
      // and one of them moves each.
      const written = await Promise.all([
        fanOutAll(db.store, MESSAGES_PER_ENDPOINT),
        fanOutAll(other, MESSAGES_PER_ENDPOINT),
      ]);
      assert.equal(written[0] + written[1], 600);
      const [row] = await db.rows<{ n: number | bigint }>(
        'SELECT count(*) AS n FROM (SELECT DISTINCT endpoint_id, payload FROM webhook_messages) d',
      );
      assert.equal(Number(row!.n), 600);
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
