import assert from 'node:assert/strict';
import { fanOutAll } from '../helpers/fan-out.js';
import { MESSAGES_PER_ENDPOINT } from '../../src/store/webhook-log.js';
import { describe, it, type TestContext } from 'node:test';
import { IDEMPOTENCY_KEY_TTL_MS } from '../../src/core/idempotency.js';
import { silentLog } from '../../src/core/log.js';
import { Maintenance } from '../../src/service/maintenance.js';
import type { Store } from '../../src/store/store.js';
import { type Backend, forEachBackend } from '../helpers/backends.js';
import { listed } from '../helpers/listed.js';

// Every table that grows with writes stays bounded, counted in rows on both databases: what
// deletes each one's rows does delete them (see docs/operating.md, "Tables and their growth").
// Times are the ones the callers give the store (a claim's `at`, an attempt's `at`), so no
// test waits for a clock.

interface GrowthDatabase {
  store: Store;
  /** Rows in `table`, counted on a connection of the test's own. */
  rows(table: string): Promise<number>;
}

/** A fresh database of `backend` with a store on it, and its rows counted. */
async function growthDatabase(t: TestContext, backend: Backend): Promise<GrowthDatabase> {
  const db = await backend.fresh(t);
  const store = await db.open({ poolSize: 2 });
  return {
    store,
    async rows(table) {
      const [row] = await db.query<{ n: number | bigint }>(`SELECT count(*) AS n FROM ${table}`);
      return Number(row!.n);
    },
  };
}

const T0 = new Date('2030-01-01T00:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

forEachBackend((backend) => {
  describe('tables and their growth', () => {
    it('idempotency_keys: a claim takes over its own expired key and deletes no other', async (t) => {
      const { store, rows } = await growthDatabase(t, backend);
      const claim = (key: string, when: Date, tokenId = 1) =>
        store.idempotency.claim({ tokenId, key, fingerprint: 'f', at: when });
      for (let i = 0; i < 150; i++) await claim(`old-${i}`, T0);
      await claim('young', at(IDEMPOTENCY_KEY_TTL_MS / 2), 2);
      const refusal = { name: 'plantExists', message: 'exists' } as const;
      await store.idempotency.settle({ tokenId: 2, key: 'young' }, refusal);
      assert.equal(await rows('idempotency_keys'), 151);

      // A day after the first 150: they are expired, the young one is not. Deleting them is
      // the maintenance round's (below), not a create's.
      const later = at(IDEMPOTENCY_KEY_TTL_MS + 1);
      assert.deepEqual(await claim('new-1', later), { state: 'claimed' });
      assert.equal(await rows('idempotency_keys'), 152, 'one added, none deleted');
      assert.deepEqual(await claim('old-0', later), { state: 'claimed' }, 'expired: taken over');
      assert.equal(await rows('idempotency_keys'), 152, 'taken over in place');
      assert.deepEqual(
        await claim('young', later, 2),
        { state: 'answered', answer: { refusal } },
        'kept, answer and all',
      );
    });

    it('idempotency_keys: a maintenance round deletes every expired key, with no claim', async (t) => {
      const { store, rows } = await growthDatabase(t, backend);
      for (let i = 0; i < 120; i++) {
        await store.idempotency.claim({ tokenId: 1, key: `k${i}`, fingerprint: 'f', at: T0 });
      }
      await store.idempotency.claim({ tokenId: 1, key: 'young', fingerprint: 'f', at: at(1) });
      const round = (ms: number) =>
        new Maintenance(store, { log: silentLog, now: () => T0.getTime() + ms }).round();
      assert.equal((await round(IDEMPOTENCY_KEY_TTL_MS - 1)).idempotencyKeys, 0, 'none expired');
      assert.equal((await round(IDEMPOTENCY_KEY_TTL_MS)).idempotencyKeys, 120);
      assert.equal(await rows('idempotency_keys'), 1, 'the young key');
      assert.equal((await round(IDEMPOTENCY_KEY_TTL_MS + 1)).idempotencyKeys, 1);
      assert.equal(await rows('idempotency_keys'), 0);
    });

    it('webhook_messages and webhook_attempts: purged with their retention, pending ones kept', async (t) => {
      const { store, rows } = await growthDatabase(t, backend);
      await store.webhooks.create({
        url: 'https://example.com/hook',
        events: ['plant.created'],
        secret: 'whsec_first',
        at: T0,
      });
      for (const name of ['a', 'b', 'c', 'd']) await store.plants.insert({ name });
      await store.webhookEvents.fanOut(1000);
      const q = store.webhookQueue;
      const [a, b, c, d] = await q.claim(new Date('2100-01-01T00:00:00Z'), 1000, 10);
      assert.ok(a && b && c && d);
      const attempt = (status: number | null, ms: number) => ({
        at: at(ms),
        durationMs: 5,
        httpStatus: status,
        error: status === null ? 'timed out' : null,
        responseExcerpt: '',
      });
      await q.finish(a.id, a.claimedUntil, attempt(204, 1), { kind: 'delivered' });
      await q.finish(b.id, b.claimedUntil, attempt(null, 2), { kind: 'failed' });
      await q.finish(c.id, c.claimedUntil, attempt(204, 10), { kind: 'delivered' });
      await q.finish(d.id, d.claimedUntil, attempt(500, 3), { kind: 'retry', at: at(60_000) });
      assert.deepEqual([await rows('webhook_messages'), await rows('webhook_attempts')], [4, 4]);

      assert.equal(await q.purge(at(5)), 2, 'a delivered and b failed before the cut-off');
      assert.deepEqual(
        [await rows('webhook_messages'), await rows('webhook_attempts')],
        [2, 2],
        'their attempts went with them; c (completed later) and d (pending) stay',
      );
      assert.equal(await q.purge(at(1_000_000)), 1, 'c; d is pending, whatever its age');
      assert.deepEqual([await rows('webhook_messages'), await rows('webhook_attempts')], [1, 1]);
    });

    it('webhook_messages: a write adds none; an endpoint holds MESSAGES_PER_ENDPOINT pending at most', async (t) => {
      const { store, rows } = await growthDatabase(t, backend);
      for (let i = 0; i < 3; i++) {
        await store.webhooks.create({
          url: 'https://example.com/hook',
          events: ['plant.created'],
          secret: 'whsec_first',
          at: T0,
        });
      }
      const writes = MESSAGES_PER_ENDPOINT + 10;
      for (let i = 0; i < writes; i++) await store.plants.insert({ name: `p${i}` });
      assert.equal(await rows('webhook_messages'), 0, 'the writes wrote none');
      assert.equal(await fanOutAll(store), 3 * MESSAGES_PER_ENDPOINT);
      assert.equal(await rows('webhook_messages'), 3 * MESSAGES_PER_ENDPOINT, 'the rest wait');
    });

    it('audit_log: a maintenance round with a retention deletes the older entries', async (t) => {
      const { store, rows } = await growthDatabase(t, backend);
      for (let id = 1n; id <= 3n; id++) await store.plants.insert({ id, name: 'Fern' });
      const [last] = (await store.audit.list({ limit: 10 })).slice(-1);
      const kept = new Maintenance(store, { log: silentLog, auditRetentionMs: 86_400_000 });
      assert.equal((await kept.round()).auditEntries, 0, 'all younger than a day');
      assert.equal(await rows('audit_log'), 3);
      // A clock two days on: every entry is past a day's retention.
      const twoDaysOn = last!.at.getTime() + 2 * 86_400_000;
      const round = new Maintenance(store, {
        log: silentLog,
        auditRetentionMs: 86_400_000,
        now: () => twoDaysOn,
      });
      assert.equal((await round.round()).auditEntries, 3);
      assert.equal(await rows('audit_log'), 0);
    });

    if (backend.dialect === 'postgres') {
      it('plant_ids_taken: a maintenance round deletes the ids the sequence has passed', async (t) => {
        const { store, rows } = await growthDatabase(t, backend);
        for (let i = 0; i < 20; i++) await store.plants.insert({ name: 'server' });
        const first = (await listed(store.plants, { limit: 1 }))[0]!.id;
        await store.plants.insert({ id: first + 100n, name: 'ahead' });
        await store.plants.insert({ id: first - 50n, name: 'behind' });
        assert.equal(await rows('plant_ids_taken'), 22, 'one a create, server or client');
        const pruned = await new Maintenance(store, { log: silentLog }).round();
        assert.equal(pruned.takenIds, 21);
        assert.equal(await rows('plant_ids_taken'), 1, 'the id taken ahead of the sequence');
      });
    } else {
      it('plant_id_runs: a run of ids taken ahead is deleted once server creates pass it', async (t) => {
        const { store, rows } = await growthDatabase(t, backend);
        const first = (await store.plants.insert({ name: 'server' })).id;
        // Taken ahead: 2 and 3 one run, 5 another, 100 a third.
        for (const offset of [2n, 3n, 5n, 100n]) {
          await store.plants.insert({ id: first + offset, name: 'client' });
        }
        await store.plants.insert({ id: first - 1n, name: 'below: no record' });
        assert.equal(await rows('plant_id_runs'), 3);
        for (let i = 0; i < 3; i++) await store.plants.insert({ name: 'server' }); // 1, 4, 6
        assert.equal(await rows('plant_id_runs'), 1, 'only the run at 100, still ahead');
      });
    }
  });
});
