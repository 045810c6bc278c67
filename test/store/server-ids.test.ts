import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { INT64_MAX } from '../../src/core/int64.js';
import {
  IdsExhaustedError,
  PlantExistsError,
  type PlantStore,
  type Store,
} from '../../src/store/store.js';
import { ID_BACKENDS } from './id-databases.js';

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

for (const backend of ID_BACKENDS) {
  describe(`server-assigned ids (${backend.name})`, { skip: backend.skip }, () => {
    it('keep coming after clients took the largest ids there are', async (t) => {
      const store = await (await backend.fresh(t)).open();
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
      const db = await backend.fresh(t);
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
    });

    it('never give out the id of a deleted plant, assigned or chosen, after a restart too', async (t) => {
      const db = await backend.fresh(t);
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
      const db = await backend.fresh(t);
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
      // 8 lanes per instance: 2 x 200 server-assigned creates.
      await Promise.all(stores.flatMap((store) => Array.from({ length: 8 }, () => lane(store))));
      assert.equal(assigned.length, 400);
      assert.equal(new Set(assigned).size, 400, 'no id assigned twice');
      const reused = assigned.filter((id) => taken.has(id));
      assert.deepEqual(reused, [], 'no assigned id is one a client took');
      assert.ok(taken.size > 0, 'some client creates got their id');
      for (const id of assigned) assert.equal((await stores[0]!.plants.get(id))?.id, id);
    });

    it('run out only at the largest id, answering IdsExhaustedError', async (t) => {
      const db = await backend.fresh(t);
      const store = await db.open();
      await db.setLastAssigned(INT64_MAX - 2n);
      await store.plants.insert({ id: INT64_MAX, name: 'given' });
      assert.equal(await assign(store.plants), INT64_MAX - 1n);
      await assert.rejects(store.plants.insert({ name: 'none left' }), IdsExhaustedError);
      const given = await store.plants.insert({ id: 5n, name: 'given' });
      assert.deepEqual([given.id, given.name], [5n, 'given']);
    });

    it('continue above the old counter once a database at schema 3 is migrated', async (t) => {
      const db = await backend.fresh(t, 3);
      await db.fillLegacy({ high: 1000n, plants: [-4n, 3n, 7n], deleted: [1000n] });
      const store = await db.open();
      assert.equal(store.migration.applied[0], 4, 'the ids migration first of those applied');
      assert.equal(await assign(store.plants), 1001n);
      const old = await store.plants.get(7n);
      assert.deepEqual([old?.id, old?.name, old?.tag], [7n, 'old', undefined]);
    });

    it('come back on a migrated database whose old counter had none left', async (t) => {
      const db = await backend.fresh(t, 3);
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
}
