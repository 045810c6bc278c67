import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { ClaimedMessage, Store } from '../../src/store/store.js';
import { forEachBackend, type TestDatabase } from '../helpers/backends.js';

// A claim lets the endpoints take turns: with 20 endpoints whose receivers hang, each with a
// backlog of due messages older than anyone else's, a claim still reaches the 21st endpoint's
// message, and a claim told to take none of the 20 takes it alone. The backlogs are written
// straight into the queue's table, as the claim finds them whatever wrote them.

const HUNG = 20;
const BACKLOG = 100;
const NOW = new Date('2026-01-01T12:00:00Z');
const LEASE_MS = 30_000;

/** `count` pending messages for `endpoint`, due from `from` on, a millisecond apart. */
async function backlog(db: TestDatabase, endpoint: bigint, count: number, from: Date) {
  const rows = Array.from({ length: count }, (_, i) => ({
    webhookId: `msg_${endpoint}_${from.getTime()}_${i}`,
    due: from.getTime() + i,
  }));
  if (db.dialect === 'sqlite') {
    const file = new Database(db.file);
    try {
      const insert = file.prepare(
        `INSERT INTO webhook_messages
           (endpoint_id, webhook_id, event_type, payload, created_at, next_attempt_at)
         VALUES (?, ?, 'plant.created', '{}', ?, ?)`,
      );
      file.transaction(() => {
        for (const row of rows) insert.run(endpoint, row.webhookId, row.due, row.due);
      })();
    } finally {
      file.close();
    }
    return;
  }
  await db.query(
    `INSERT INTO webhook_messages
       (endpoint_id, webhook_id, event_type, payload, created_at, next_attempt_at)
     SELECT $1, w, 'plant.created', '{}', to_timestamp(d / 1000.0), to_timestamp(d / 1000.0)
     FROM unnest($2::text[], $3::bigint[]) AS r (w, d)`,
    [endpoint.toString(), rows.map((r) => r.webhookId), rows.map((r) => r.due)],
  );
}

/** A store with 20 endpoints, 100 messages due an hour ago each, and one with one due now. */
async function hungAndHealthy(db: TestDatabase) {
  const store: Store = await db.open();
  const endpoint = (name: string) =>
    store.webhooks.create({
      url: `https://${name}.example/hook`,
      events: ['plant.created'],
      secret: 'whsec_x',
      at: NOW,
    });
  const hung: bigint[] = [];
  for (let i = 0; i < HUNG; i++) hung.push((await endpoint(`hung${i}`)).id);
  const healthy = (await endpoint('healthy')).id;
  for (const id of hung) await backlog(db, id, BACKLOG, new Date(NOW.getTime() - 3_600_000));
  await backlog(db, healthy, 1, NOW);
  return { store, hung, healthy };
}

const countBy = (messages: ClaimedMessage[]) => {
  const counts = new Map<bigint, number>();
  for (const m of messages) counts.set(m.endpoint.id, (counts.get(m.endpoint.id) ?? 0) + 1);
  return counts;
};

forEachBackend((backend) => {
  describe('webhook claims: endpoints take turns', () => {
    it('reaches the message of an endpoint behind 20 older backlogs', async (t) => {
      const { store, healthy } = await hungAndHealthy(await backend.fresh(t));
      // The earliest due messages all belong to the backlogs: taken by due time alone, a
      // claim of 21 would hold none of the healthy endpoint's.
      const claimed = await store.webhookQueue.claim(NOW, LEASE_MS, HUNG + 1);
      const counts = countBy(claimed);
      assert.equal(counts.size, HUNG + 1, 'one message of each endpoint');
      assert.equal(counts.get(healthy), 1);
      assert.deepEqual(new Set(counts.values()), new Set([1]));
      assert.deepEqual(
        claimed.map((m) => m.id),
        claimed.map((m) => m.id).sort((a, b) => (a < b ? -1 : 1)),
        'in id order, as before',
      );
    });

    it('takes at most each endpoint’s share, the first of each before any second', async (t) => {
      const { store, hung, healthy } = await hungAndHealthy(await backend.fresh(t));
      const shares = { perEndpoint: 3, endpoints: new Map([[hung[0]!, 10]]) };
      const first = await store.webhookQueue.claim(NOW, LEASE_MS, 1000, shares);
      const counts = countBy(first);
      assert.equal(counts.get(hung[0]!), 10);
      assert.equal(counts.get(hung[1]!), 3);
      assert.equal(counts.get(healthy), 1, 'all it has');
      assert.equal(first.length, 10 + 3 * (HUNG - 1) + 1);
      // A claim cut short by its limit: every endpoint's first, then seconds by due time.
      const next = await store.webhookQueue.claim(NOW, LEASE_MS, HUNG + 5, shares);
      const again = countBy(next);
      assert.equal(again.size, HUNG, 'the healthy endpoint has nothing left due');
      assert.equal(next.length, HUNG + 5);
      assert.ok([...again.values()].every((n) => n === 1 || n === 2));
    });

    it('passes over the endpoints whose share is 0, whatever their backlog', async (t) => {
      const { store, hung, healthy } = await hungAndHealthy(await backend.fresh(t));
      const shares = { perEndpoint: 16, endpoints: new Map(hung.map((id) => [id, 0])) };
      const claimed = await store.webhookQueue.claim(NOW, LEASE_MS, 128, shares);
      assert.deepEqual(
        claimed.map((m) => m.endpoint.id),
        [healthy],
      );
      assert.equal(claimed[0]!.attempt, 1);
      assert.deepEqual(await store.webhookQueue.claim(NOW, LEASE_MS, 128, shares), []);
    });
  });
});
