import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { INT64_MAX } from '../../src/core/int64.js';
import {
  IdsExhaustedError,
  PlantExistsError,
  type PlantStore,
  type Store,
} from '../../src/store/store.js';
import { forEachBackend } from '../helpers/backends.js';
import { withCleanups } from '../helpers/cleanups.js';
import { idDatabase } from './id-databases.js';

// Server-assigned ids (issue #13): whatever ids clients choose, a create without an id gets
// one, never the id of a plant that exists or existed, on every instance; on both databases.

const assign = async (plants: PlantStore, name = 'assigned') => (await plants.insert({ name })).id;

/** Client creates of ids just ahead of the ids assigned, some deleted at once. */
async function clientCreatesAhead(
  store: Store,
  ahead: () => bigint,
  taken: Set<bigint>,
): Promise<void> {
  const id = ahead();
  try {
    await store.plants.insert({ id, name: 'given' });
  } catch (error) {
    // The server assigned the id first: what a client must expect.
    if (error instanceof PlantExistsError) return;
    throw error;
  }
  taken.add(id);
  if (id % 2n === 0n) assert.equal(await store.plants.delete(id), true);
}

/** Steps around the last id assigned: client creates and deletes, server creates, prunes. */
const idOp = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('client' as const),
      offset: fc.integer({ min: -2, max: 5 }),
    }),
  },
  // Deletes a live plant, the n-th from the largest: mostly the ids clients took ahead.
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('delete' as const), nth: fc.nat({ max: 3 }) }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('server' as const) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('prune' as const),
      batch: fc.constantFrom(1, 2, 1000),
    }),
  },
);

type IdOp = typeof idOp extends fc.Arbitrary<infer T> ? T : never;

/**
 * Runs the steps, checking that each server create gets exactly the first id above the last
 * one assigned that no plant ever had.
 */
async function followsTheModel(store: Store, ops: IdOp[]): Promise<void> {
  let last = await assign(store.plants);
  const had = new Set([last]);
  const live = new Set([last]);
  for (const step of ops) {
    if (step.kind === 'server') {
      let expected = last + 1n;
      while (had.has(expected)) expected++;
      last = await assign(store.plants);
      assert.equal(last, expected);
      had.add(last);
      live.add(last);
    } else if (step.kind === 'client') {
      const id = last + BigInt(step.offset);
      const made = store.plants.insert({ id, name: 'given' });
      if (live.has(id)) await assert.rejects(made, PlantExistsError);
      else await made;
      had.add(id);
      live.add(id);
    } else if (step.kind === 'delete') {
      const id = [...live].sort((a, b) => (a < b ? 1 : -1))[step.nth];
      if (id !== undefined) assert.equal(await store.plants.delete(id), live.delete(id));
    } else {
      await store.pruneTakenIds?.(step.batch);
    }
  }
}

forEachBackend((backend) => {
  describe('server-assigned ids', () => {
    it('keep coming after clients took the largest ids there are', async (t) => {
      const store = await (await idDatabase(t, backend)).open();
      for (const id of [INT64_MAX, INT64_MAX - 1n, INT64_MAX - 2n]) {
        await store.plants.insert({ id, name: 'top' });
      }
      const first = await assign(store.plants);
      assert.equal(await assign(store.plants), first + 1n);
      assert.ok(first < INT64_MAX - 2n, `${first}`);
      await store.plants.delete(INT64_MAX);
      assert.equal(await assign(store.plants), first + 2n);
    });

    it('skip the ids clients took, the next one first, a long run too', async (t) => {
      const db = await idDatabase(t, backend);
      const store = await db.open();
      const first = await assign(store.plants);
      await store.plants.insert({ id: first + 1n, name: 'the next id' });
      assert.equal(await assign(store.plants), first + 2n);
      await store.plants.insert({ id: first + 4n, name: 'one further' });
      assert.equal(await assign(store.plants), first + 3n);
      assert.equal(await assign(store.plants), first + 5n);
      // Longer than one look at the taken ids reads (10,000).
      await db.takeByHand(first + 6n, 25_000);
      assert.equal(await assign(store.plants), first + 25_006n);
      // So does a create with an Idempotency-Key new to the store (statements of their own).
      await db.takeByHand(first + 25_007n, 25_000);
      const claim = { tokenId: 1, key: 'k', fingerprint: 'f', at: new Date() };
      const keyed = await store.plants.insertWithKey({ name: 'keyed' }, { claim });
      assert.equal(keyed.state === 'created' && keyed.plant.id, first + 50_007n);
    });

    it('never give out the id of a deleted plant, assigned or chosen, after a restart too', async (t) => {
      const db = await idDatabase(t, backend);
      const store = await db.open();
      const first = await assign(store.plants);
      await store.plants.insert({ id: first + 2n, name: 'given' });
      assert.equal(await store.plants.delete(first + 2n), true);
      const second = await assign(store.plants);
      assert.equal(second, first + 1n);
      assert.equal(await store.plants.delete(second), true);
      assert.equal(await assign(store.plants), first + 3n);
      await store.close();
      const again = await db.open();
      await again.plants.insert({ id: first + 5n, name: 'given' });
      assert.equal(await again.plants.delete(first + 5n), true);
      assert.equal(await assign(again.plants), first + 4n);
      assert.equal(await assign(again.plants), first + 6n);
      // A client may take back any id, a deleted server-assigned one included.
      await again.plants.insert({ id: second, name: 'taken back' });
    });

    it('are unique across instances creating at once, with clients taking ids just ahead', async (t) => {
      const db = await idDatabase(t, backend);
      const stores = [await db.open(), await db.open()];
      const assigned: bigint[] = [];
      const taken = new Set<bigint>();
      let highest = 0n;
      let turn = 0n;
      // Within what 16 lanes assign in a turn or two: clients win some ids and lose others.
      const ahead = () => highest + 1n + (turn++ % 24n);
      const lane = async (store: Store) => {
        for (let n = 0; n < 25; n++) {
          const id = await assign(store.plants);
          assigned.push(id);
          if (id > highest) highest = id;
          await clientCreatesAhead(store, ahead, taken);
        }
      };
      // Pruning as the instances do once a minute, here all the time (PostgreSQL).
      let creating = true;
      const prune = async (store: Store) => {
        while (creating) await store.pruneTakenIds?.(3);
      };
      // 8 lanes per instance: 2 x 200 server-assigned creates.
      const lanes = Promise.all(
        stores.flatMap((store) => Array.from({ length: 8 }, () => lane(store))),
      ).finally(() => (creating = false));
      await Promise.all([lanes, ...(stores[1]!.pruneTakenIds ? [prune(stores[1]!)] : [])]);
      assert.equal(assigned.length, 400);
      assert.equal(new Set(assigned).size, 400, 'no id assigned twice');
      const reused = assigned.filter((id) => taken.has(id));
      assert.deepEqual(reused, [], 'no assigned id is one a client took');
      assert.ok(taken.size > 0, 'some client creates got their id');
      for (const id of assigned) assert.equal((await stores[0]!.plants.get(id))?.id, id);
    });

    it('are pruned only at or below the last one drawn: ids taken ahead are kept', async (t) => {
      const store = await (await idDatabase(t, backend)).open();
      const first = await assign(store.plants);
      await store.plants.insert({ id: first + 2n, name: 'ahead' });
      await store.plants.delete(first + 2n);
      await store.plants.insert({ id: first - 5n, name: 'behind' });
      if (store.pruneTakenIds !== undefined) {
        // The first id claimed, and the one a client took below it.
        assert.equal(await store.pruneTakenIds(1000), 2);
        assert.equal(await store.pruneTakenIds(1000), 0);
      }
      assert.equal(await assign(store.plants), first + 1n);
      assert.equal(await assign(store.plants), first + 3n);
    });

    it('give the first id above the last one that no plant had, pruned or not (property)', async () => {
      // Clients create and delete ids around and just ahead of the last id assigned, and the
      // taken ids are pruned between writes: each server create gets exactly the first id
      // above the last one assigned that no plant ever had.
      await fc.assert(
        fc.asyncProperty(fc.array(idOp, { minLength: 5, maxLength: 40 }), (ops) =>
          // Each run's database goes as the run ends, not with the test: on PostgreSQL the
          // next run takes its schema back reset instead of migrating one more.
          withCleanups(async (run) => {
            const store = await (await idDatabase(run, backend)).open();
            await followsTheModel(store, ops);
          }),
        ),
        { numRuns: backend.dialect === 'sqlite' ? 200 : 40, seed: 22 },
      );
    });

    it('run out only at the largest id, answering IdsExhaustedError', async (t) => {
      const db = await idDatabase(t, backend);
      const store = await db.open();
      await db.setLastAssigned(INT64_MAX - 2n);
      await store.plants.insert({ id: INT64_MAX, name: 'given' });
      assert.equal(await assign(store.plants), INT64_MAX - 1n);
      await assert.rejects(store.plants.insert({ name: 'none left' }), IdsExhaustedError);
      const given = await store.plants.insert({ id: 5n, name: 'given' });
      assert.deepEqual([given.id, given.name], [5n, 'given']);
    });

    it('continue above the old counter once a database at schema 3 is migrated', async (t) => {
      const db = await idDatabase(t, backend, 3);
      await db.fillLegacy({ high: 1000n, plants: [-4n, 3n, 7n], deleted: [1000n] });
      const store = await db.open();
      assert.equal(store.migration.applied[0], 4, 'the ids migration first of those applied');
      assert.equal(await assign(store.plants), 1001n);
      const old = await store.plants.get(7n);
      assert.deepEqual([old?.id, old?.name, old?.tag], [7n, 'old', undefined]);
    });

    it('come back on a migrated database whose old counter had none left', async (t) => {
      const db = await idDatabase(t, backend, 3);
      const top = [INT64_MAX - 1n, INT64_MAX];
      await db.fillLegacy({ high: INT64_MAX, plants: [1n, 2n, ...top], deleted: [10n, 2n ** 62n] });
      const store = await db.open();
      assert.equal(await assign(store.plants), 11n);
      // The ids known above it are skipped: 2^62 (deleted), then the two at the top.
      await db.setLastAssigned(2n ** 62n - 1n);
      assert.equal(await assign(store.plants), 2n ** 62n + 1n);
      await db.setLastAssigned(INT64_MAX - 2n);
      await assert.rejects(store.plants.insert({ name: 'none left' }), IdsExhaustedError);
    });
  });
});
