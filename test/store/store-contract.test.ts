import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { setImmediate } from 'node:timers/promises';
import fc from 'fast-check';
import { INT64_MAX, INT64_MIN } from '../../src/core/int64.js';
import {
  IDEMPOTENCY_KEY_TTL_MS,
  IDEMPOTENCY_LEASE_MS,
  type IdempotencyClaim,
} from '../../src/core/idempotency.js';
import type { Plant, StoredPlant } from '../../src/core/plant.js';
import type { TokenRecord } from '../../src/core/tokens.js';
import {
  KeyNotHeldError,
  type NewToken,
  PlantChangedError,
  PlantExistsError,
  type Store,
} from '../../src/store/store.js';
import { forEachBackend } from '../helpers/backends.js';
import { wellFormed } from '../helpers/arbitrary-request-parts.js';
import { listed } from '../helpers/listed.js';

/**
 * The Store contract, independent of the database, on each backend of the loop: `open`
 * returns a fresh, empty store for the test and registers its own clean-up on `t` (closing
 * twice must be harmless).
 */
function storeContract(open: (t: TestContext) => Promise<Store>): void {
  const ids = (plants: Plant[]) => plants.map((plant) => plant.id);
  /** A stored plant as its representation: the version left out (tested on its own). */
  const shown = (plant: StoredPlant | undefined): Plant | undefined => {
    if (plant === undefined) return undefined;
    const { version, ...representation } = plant;
    assert.equal(typeof version, 'bigint');
    return representation;
  };
  const token = (overrides: Partial<NewToken> = {}): NewToken => ({
    name: 'ci',
    hash: 'a'.repeat(64),
    scopes: ['plants:read'],
    createdAt: new Date('2024-05-06T07:08:09.123Z'),
    expiresAt: null,
    ...overrides,
  });

  describe('the store contract', () => {
    describe('plants.insert', () => {
      it('stores a plant with the id given and returns it', async (t) => {
        const store = await open(t);
        const plant = await store.plants.insert({ id: 42n, name: 'Fern', tag: 'green' });
        assert.deepEqual(shown(plant), { id: 42n, name: 'Fern', tag: 'green' });
        assert.deepEqual(shown(await store.plants.get(42n)), {
          id: 42n,
          name: 'Fern',
          tag: 'green',
        });
      });

      it('returns a plant without a tag property when none is given', async (t) => {
        const store = await open(t);
        const plant = await store.plants.insert({ id: 1n, name: 'Fern' });
        assert.deepEqual(shown(plant), { id: 1n, name: 'Fern' });
        assert.equal(Object.hasOwn(plant, 'tag'), false);
      });

      it('assigns increasing bigint ids when none is given', async (t) => {
        const store = await open(t);
        const first = await store.plants.insert({ name: 'a' });
        const second = await store.plants.insert({ name: 'b' });
        const third = await store.plants.insert({ name: 'c' });
        assert.equal(typeof first.id, 'bigint');
        assert.ok(first.id < second.id && second.id < third.id, `${ids([first, second, third])}`);
        assert.deepEqual(shown(await store.plants.get(second.id)), { id: second.id, name: 'b' });
      });

      it('never assigns the id of a deleted plant again', async (t) => {
        const store = await open(t);
        await store.plants.insert({ name: 'a' });
        const last = await store.plants.insert({ name: 'b' });
        assert.equal(await store.plants.delete(last.id), true);
        const next = await store.plants.insert({ name: 'c' });
        assert.ok(next.id > last.id, `${next.id} after deleted ${last.id}`);
      });

      it('never assigns an id a client took, even once that plant is deleted', async (t) => {
        const store = await open(t);
        const first = await store.plants.insert({ name: 'assigned' });
        await store.plants.insert({ id: first.id + 1n, name: 'given' });
        await store.plants.insert({ id: first.id + 2n, name: 'given, deleted' });
        assert.equal(await store.plants.delete(first.id + 2n), true);
        const next = await store.plants.insert({ name: 'assigned' });
        assert.ok(next.id > first.id + 2n, `${next.id} after ${first.id} and two taken`);
      });

      it('throws PlantExistsError with the id on a duplicate, keeping the first plant', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: 7n, name: 'first' });
        await assert.rejects(
          store.plants.insert({ id: 7n, name: 'second' }),
          (error: unknown) => error instanceof PlantExistsError && error.id === 7n,
        );
        assert.deepEqual(shown(await store.plants.get(7n)), { id: 7n, name: 'first' });
      });

      it('keeps assigning ids once a client took INT64_MAX, also after it is deleted', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: INT64_MAX, name: 'last' });
        const assigned = await store.plants.insert({ name: 'x' });
        assert.ok(assigned.id < INT64_MAX, `${assigned.id}`);
        await store.plants.delete(INT64_MAX);
        const next = await store.plants.insert({ name: 'y' });
        assert.ok(next.id > assigned.id && next.id < INT64_MAX, `${next.id}`);
      });

      it('keeps the int64 extremes exact', async (t) => {
        const store = await open(t);
        for (const id of [INT64_MAX, INT64_MIN, INT64_MAX - 1n, INT64_MIN + 1n, 2n ** 53n + 1n]) {
          const inserted = await store.plants.insert({ id, name: `p${id}` });
          assert.equal(inserted.id, id);
          const read = await store.plants.get(id);
          assert.equal(typeof read?.id, 'bigint');
          assert.equal(read?.id, id);
          assert.equal(read?.name, `p${id}`);
        }
      });
    });

    describe('plants.get', () => {
      it('returns undefined for a missing id', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: 1n, name: 'a' });
        assert.equal(await store.plants.get(2n), undefined);
        assert.equal(await store.plants.get(INT64_MIN), undefined);
      });
    });

    describe('plants.list', () => {
      const seed = async (store: Store) => {
        for (const [id, tag] of [
          [5n, 'red'],
          [-3n, 'green'],
          [INT64_MAX, 'red'],
          [0n, undefined],
          [INT64_MIN, 'red'],
          [12n, 'green'],
          [-1n, 'red'],
        ] as const) {
          await store.plants.insert(
            tag === undefined ? { id, name: `p${id}` } : { id, name: `p${id}`, tag },
          );
        }
      };

      it('orders by id over negative and positive ids', async (t) => {
        const store = await open(t);
        await seed(store);
        assert.deepEqual(ids(await listed(store.plants, { limit: 100 })), [
          INT64_MIN,
          -3n,
          -1n,
          0n,
          5n,
          12n,
          INT64_MAX,
        ]);
      });

      it('returns the whole plant, without tag when it has none', async (t) => {
        const store = await open(t);
        await seed(store);
        const plants = await listed(store.plants, { limit: 100 });
        assert.deepEqual(plants[3], { id: 0n, name: 'p0' });
        assert.deepEqual(plants[1], { id: -3n, name: 'p-3', tag: 'green' });
      });

      it('returns at most limit plants, the smallest ids first', async (t) => {
        const store = await open(t);
        await seed(store);
        assert.deepEqual(ids(await listed(store.plants, { limit: 2 })), [INT64_MIN, -3n]);
        assert.deepEqual(ids(await listed(store.plants, { limit: 1 })), [INT64_MIN]);
      });

      it('returns only ids strictly greater than after', async (t) => {
        const store = await open(t);
        await seed(store);
        assert.deepEqual(ids(await listed(store.plants, { limit: 100, after: -1n })), [
          0n,
          5n,
          12n,
          INT64_MAX,
        ]);
        assert.deepEqual(ids(await listed(store.plants, { limit: 2, after: -4n })), [-3n, -1n]);
        assert.deepEqual(ids(await listed(store.plants, { limit: 100, after: INT64_MAX })), []);
        assert.deepEqual(ids(await listed(store.plants, { limit: 1, after: INT64_MIN })), [-3n]);
      });

      it('pages through every plant with after = the last id of the previous page', async (t) => {
        const store = await open(t);
        await seed(store);
        const seen: bigint[] = [];
        let after: bigint | undefined;
        for (;;) {
          const page = await listed(
            store.plants,
            after === undefined ? { limit: 3 } : { limit: 3, after },
          );
          seen.push(...ids(page));
          if (page.length < 3) break;
          after = page.at(-1)!.id;
        }
        assert.deepEqual(seen, [INT64_MIN, -3n, -1n, 0n, 5n, 12n, INT64_MAX]);
      });

      it('filters by tag, combined with after and limit', async (t) => {
        const store = await open(t);
        await seed(store);
        assert.deepEqual(ids(await listed(store.plants, { limit: 100, tag: 'red' })), [
          INT64_MIN,
          -1n,
          5n,
          INT64_MAX,
        ]);
        assert.deepEqual(
          ids(await listed(store.plants, { limit: 2, tag: 'red', after: INT64_MIN })),
          [-1n, 5n],
        );
        assert.deepEqual(ids(await listed(store.plants, { limit: 100, tag: 'green' })), [-3n, 12n]);
        assert.deepEqual(await listed(store.plants, { limit: 100, tag: 'blue' }), []);
      });

      it('writes names and tags into the page as JSON.stringify does, whatever they hold', async (t) => {
        const store = await open(t);
        const text = fc
          .string({ unit: 'binary', minLength: 1, maxLength: 12 })
          // As the API admits them: no U+0000, no unpaired surrogate (refused with 40003).
          .map((s) => wellFormed(s.replaceAll('\u0000', '0')));
        const hard = fc.constantFrom(
          '"',
          '\\',
          '\n\t\b\f\r',
          '\u001f\u007f',
          '\u2028\u2029',
          '😀é',
        );
        let run = 0;
        await fc.assert(
          fc.asyncProperty(
            fc.array(fc.oneof(text, hard), { minLength: 1, maxLength: 8 }),
            async (names) => {
              run += 1;
              const plants = names.map((name, i) =>
                i % 2 === 0
                  ? { id: BigInt(run * 100 + i), name, tag: `run ${run} ${name}` }
                  : { id: BigInt(run * 100 + i), name },
              );
              for (const plant of plants) await store.plants.insert(plant);
              // listed() compares the page's text with plantPayload of what it holds; this, what
              // it holds with what was stored.
              const page = await listed(store.plants, { limit: 8, after: BigInt(run * 100 - 1) });
              assert.deepEqual(page, plants);
            },
          ),
          { numRuns: 25 },
        );
      });

      it('returns an empty array on an empty store', async (t) => {
        const store = await open(t);
        assert.deepEqual(await listed(store.plants, { limit: 10 }), []);
      });
    });

    describe('plants.update', () => {
      it('changes the name only, keeping the tag', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: 3n, name: 'old', tag: 'keep' });
        const updated = await store.plants.update(3n, { name: 'new' });
        assert.deepEqual(shown(updated), { id: 3n, name: 'new', tag: 'keep' });
        assert.deepEqual(shown(await store.plants.get(3n)), { id: 3n, name: 'new', tag: 'keep' });
      });

      it('sets a tag, keeping the name', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: 3n, name: 'fern' });
        assert.deepEqual(shown(await store.plants.update(3n, { tag: 'green' })), {
          id: 3n,
          name: 'fern',
          tag: 'green',
        });
        assert.deepEqual(shown(await store.plants.get(3n)), { id: 3n, name: 'fern', tag: 'green' });
      });

      it('removes the tag when tag is null', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: 3n, name: 'fern', tag: 'green' });
        assert.deepEqual(shown(await store.plants.update(3n, { tag: null })), {
          id: 3n,
          name: 'fern',
        });
        const read = await store.plants.get(3n);
        assert.deepEqual(shown(read), { id: 3n, name: 'fern' });
        assert.deepEqual(ids(await listed(store.plants, { limit: 10, tag: 'green' })), []);
      });

      it('with an empty change returns the plant unchanged', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: 3n, name: 'fern', tag: 'green' });
        assert.deepEqual(shown(await store.plants.update(3n, {})), {
          id: 3n,
          name: 'fern',
          tag: 'green',
        });
      });

      it('returns undefined for a missing id and creates nothing', async (t) => {
        const store = await open(t);
        assert.equal(await store.plants.update(9n, { name: 'x' }), undefined);
        assert.equal(await store.plants.get(9n), undefined);
      });

      it('keeps int64 extreme ids exact', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: INT64_MIN, name: 'min' });
        assert.deepEqual(shown(await store.plants.update(INT64_MIN, { name: 'MIN' })), {
          id: INT64_MIN,
          name: 'MIN',
        });
      });
    });

    describe('plants.delete', () => {
      it('returns true and removes an existing plant', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: INT64_MAX, name: 'max' });
        await store.plants.insert({ id: 1n, name: 'other' });
        assert.equal(await store.plants.delete(INT64_MAX), true);
        assert.equal(await store.plants.get(INT64_MAX), undefined);
        assert.deepEqual(ids(await listed(store.plants, { limit: 10 })), [1n]);
      });

      it('returns false for a missing id, and for a second delete', async (t) => {
        const store = await open(t);
        assert.equal(await store.plants.delete(1n), false);
        await store.plants.insert({ id: 1n, name: 'x' });
        assert.equal(await store.plants.delete(1n), true);
        assert.equal(await store.plants.delete(1n), false);
      });
    });

    describe('conditional update and delete (expected plant)', () => {
      it('update applies when the plant is exactly as expected', async (t) => {
        const store = await open(t);
        const plant = await store.plants.insert({ id: INT64_MAX, name: 'Fern', tag: 'green' });
        const updated = await store.plants.update(INT64_MAX, { tag: null }, { expected: plant });
        assert.deepEqual(shown(updated), { id: INT64_MAX, name: 'Fern' });
      });

      it('update refuses with PlantChangedError, and writes nothing, when the plant differs', async (t) => {
        const store = await open(t);
        const before = await store.plants.insert({ id: 5n, name: 'Fern' });
        await store.plants.update(5n, { name: 'Ivy' });
        await assert.rejects(
          store.plants.update(5n, { name: 'Moss' }, { expected: before }),
          PlantChangedError,
        );
        assert.deepEqual(shown(await store.plants.get(5n)), { id: 5n, name: 'Ivy' });
      });

      it('a tag added or removed is a difference too', async (t) => {
        const store = await open(t);
        const before = await store.plants.insert({ id: 6n, name: 'Fern' });
        await store.plants.update(6n, { tag: 'x' });
        await assert.rejects(store.plants.delete(6n, { expected: before }), PlantChangedError);
        assert.ok(await store.plants.get(6n));
      });

      it('update and delete of a missing plant are undefined and false, not a change', async (t) => {
        const store = await open(t);
        const ghost = { id: 7n, name: 'Gone', version: 1n };
        assert.equal(await store.plants.update(7n, { name: 'x' }, { expected: ghost }), undefined);
        assert.equal(await store.plants.delete(7n, { expected: ghost }), false);
      });

      it('delete applies when the plant is exactly as expected', async (t) => {
        const store = await open(t);
        const plant = await store.plants.insert({ id: INT64_MIN, name: 'Fern', tag: 't' });
        assert.equal(await store.plants.delete(INT64_MIN, { expected: plant }), true);
        assert.equal(await store.plants.get(INT64_MIN), undefined);
      });

      it('of concurrent conditional updates from the same plant, exactly one applies', async (t) => {
        const store = await open(t);
        const plant = await store.plants.insert({ id: 8n, name: 'Fern' });
        const outcomes = await Promise.allSettled(
          Array.from({ length: 8 }, (_, i) =>
            store.plants.update(8n, { name: `n${i}` }, { expected: plant }),
          ),
        );
        const applied = outcomes.filter((o) => o.status === 'fulfilled');
        assert.equal(applied.length, 1, JSON.stringify(outcomes.map((o) => o.status)));
        for (const o of outcomes) {
          if (o.status === 'rejected') assert.ok(o.reason instanceof PlantChangedError);
        }
      });
    });

    describe('plant versions (the entity tag)', () => {
      it('every write gives the plant a new version; reads answer the current one', async (t) => {
        const store = await open(t);
        const created = await store.plants.insert({ id: 1n, name: 'Fern' });
        assert.equal((await store.plants.get(1n))?.version, created.version);
        const seen = new Set([created.version]);
        for (const change of [{ name: 'Ivy' }, { tag: 'x' }, { tag: null }, { name: 'Ivy' }]) {
          const updated = await store.plants.update(1n, change);
          assert.ok(updated !== undefined);
          assert.ok(!seen.has(updated.version), `version ${updated.version} again`);
          seen.add(updated.version);
          assert.equal((await store.plants.get(1n))?.version, updated.version);
        }
        const assigned = await store.plants.insert({ name: 'auto' });
        assert.ok(!seen.has(assigned.version));
      });

      it('a plant created again under a deleted id has a new version, same content or not', async (t) => {
        const store = await open(t);
        const first = await store.plants.insert({ id: 2n, name: 'Fern' });
        await store.plants.delete(2n);
        const second = await store.plants.insert({ id: 2n, name: 'Fern' });
        assert.notEqual(second.version, first.version);
        // So a conditional write made against the first plant does not apply to the second.
        await assert.rejects(
          store.plants.update(2n, { name: 'Ivy' }, { expected: first }),
          PlantChangedError,
        );
        await assert.rejects(store.plants.delete(2n, { expected: first }), PlantChangedError);
        assert.deepEqual(shown(await store.plants.get(2n)), { id: 2n, name: 'Fern' });
      });

      it('a list answers representations, without versions', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: 3n, name: 'Fern', tag: 'x' });
        assert.deepEqual(await listed(store.plants, { limit: 10 }), [
          { id: 3n, name: 'Fern', tag: 'x' },
        ]);
      });
    });

    describe('tokens', () => {
      it('create returns the record with an id and every field as given', async (t) => {
        const store = await open(t);
        const given = token({
          name: 'deploy',
          scopes: ['plants:read', 'plants:write'],
          expiresAt: new Date('2030-01-02T03:04:05.678Z'),
        });
        const record = await store.tokens.create(given);
        assert.equal(typeof record.id, 'number');
        assert.deepEqual(record, {
          id: record.id,
          name: 'deploy',
          hash: given.hash,
          scopes: ['plants:read', 'plants:write'],
          createdAt: given.createdAt,
          expiresAt: given.expiresAt,
          lastUsedAt: null,
          revokedAt: null,
        } satisfies TokenRecord);
      });

      it('create gives each token its own increasing id', async (t) => {
        const store = await open(t);
        const first = await store.tokens.create(token({ hash: '1'.repeat(64) }));
        const second = await store.tokens.create(token({ hash: '2'.repeat(64) }));
        assert.ok(second.id > first.id);
      });

      it('findByHash returns the record, undefined for an unknown hash', async (t) => {
        const store = await open(t);
        const created = await store.tokens.create(token({ hash: 'f'.repeat(64) }));
        await store.tokens.create(token({ hash: 'e'.repeat(64), name: 'other' }));
        assert.deepEqual(await store.tokens.findByHash('f'.repeat(64)), created);
        assert.equal(await store.tokens.findByHash('0'.repeat(64)), undefined);
      });

      it('list returns every token in id order', async (t) => {
        const store = await open(t);
        assert.deepEqual(await store.tokens.list(), []);
        const a = await store.tokens.create(token({ hash: '1'.repeat(64), name: 'a' }));
        const b = await store.tokens.create(token({ hash: '2'.repeat(64), name: 'b' }));
        assert.deepEqual(await store.tokens.list(), [a, b]);
      });

      it('revoke answers revoked, then already-revoked, and keeps the first time', async (t) => {
        const store = await open(t);
        const { id } = await store.tokens.create(token());
        const at = new Date('2025-02-03T04:05:06.789Z');
        assert.equal(await store.tokens.revoke(id, at), 'revoked');
        assert.equal(
          await store.tokens.revoke(id, new Date('2026-01-01T00:00:00.001Z')),
          'already-revoked',
        );
        assert.deepEqual((await store.tokens.findByHash(token().hash))?.revokedAt, at);
      });

      it('revoke of an unknown id answers not-found', async (t) => {
        const store = await open(t);
        const { id } = await store.tokens.create(token());
        assert.equal(await store.tokens.revoke(id + 1, new Date()), 'not-found');
        assert.equal((await store.tokens.findByHash(token().hash))?.revokedAt, null);
      });

      it('revoke touches only the token named', async (t) => {
        const store = await open(t);
        const a = await store.tokens.create(token({ hash: '1'.repeat(64) }));
        await store.tokens.create(token({ hash: '2'.repeat(64) }));
        await store.tokens.revoke(a.id, new Date());
        assert.ok((await store.tokens.findByHash('1'.repeat(64)))?.revokedAt instanceof Date);
        assert.equal((await store.tokens.findByHash('2'.repeat(64)))?.revokedAt, null);
      });

      it('touch records the last use', async (t) => {
        const store = await open(t);
        const { id } = await store.tokens.create(token());
        const first = new Date('2025-01-01T00:00:00.001Z');
        const later = new Date('2025-01-01T00:01:00.999Z');
        await store.tokens.touch(id, first);
        assert.deepEqual((await store.tokens.findByHash(token().hash))?.lastUsedAt, first);
        await store.tokens.touch(id, later);
        assert.deepEqual((await store.tokens.findByHash(token().hash))?.lastUsedAt, later);
      });

      it('touch of an unknown id is harmless', async (t) => {
        const store = await open(t);
        await store.tokens.touch(12345, new Date());
        assert.deepEqual(await store.tokens.list(), []);
      });

      it('dates round-trip to the millisecond', async (t) => {
        const store = await open(t);
        const createdAt = new Date(1_715_000_000_001);
        const expiresAt = new Date(4_102_444_800_999); // 2100-01-01T00:00:00.999Z
        const usedAt = new Date(1_715_000_123_457);
        const revokedAt = new Date(1_715_000_999_999);
        const { id } = await store.tokens.create(token({ createdAt, expiresAt }));
        await store.tokens.touch(id, usedAt);
        await store.tokens.revoke(id, revokedAt);
        const [record] = await store.tokens.list();
        assert.ok(record !== undefined);
        const fields: [keyof TokenRecord, Date][] = [
          ['createdAt', createdAt],
          ['expiresAt', expiresAt],
          ['lastUsedAt', usedAt],
          ['revokedAt', revokedAt],
        ];
        for (const [field, expected] of fields) {
          const value: unknown = record[field];
          assert.ok(value instanceof Date, field);
          assert.equal(value.getTime(), expected.getTime(), field);
        }
      });
    });

    describe('audit', () => {
      const by = { tokenId: 3, requestId: 'req-1' };

      it('records every write with its origin, and the plant before and after', async (t) => {
        const store = await open(t);
        const started = Date.now();
        await store.plants.insert({ id: INT64_MAX, name: 'Fern', tag: 'green' }, { by });
        await store.plants.update(INT64_MAX, { tag: null }, { by: { tokenId: 4 } });
        await store.plants.delete(INT64_MAX, { by: { requestId: 'req-3' } });
        const entries = await store.audit.list({ limit: 10 });
        assert.deepEqual(
          entries.map(({ action, plantId, tokenId, requestId, before, after }) => ({
            action,
            plantId,
            tokenId,
            requestId,
            before,
            after,
          })),
          [
            {
              action: 'create',
              plantId: INT64_MAX,
              tokenId: 3,
              requestId: 'req-1',
              before: null,
              after: { id: INT64_MAX, name: 'Fern', tag: 'green' },
            },
            {
              action: 'update',
              plantId: INT64_MAX,
              tokenId: 4,
              requestId: null,
              before: { id: INT64_MAX, name: 'Fern', tag: 'green' },
              after: { id: INT64_MAX, name: 'Fern' },
            },
            {
              action: 'delete',
              plantId: INT64_MAX,
              tokenId: null,
              requestId: 'req-3',
              before: { id: INT64_MAX, name: 'Fern' },
              after: null,
            },
          ],
        );
        const seqs = entries.map((entry) => entry.seq);
        assert.ok(seqs[0]! < seqs[1]! && seqs[1]! < seqs[2]!, `${seqs}`);
        for (const entry of entries) {
          assert.ok(entry.at.getTime() >= started - 1000 && entry.at.getTime() <= Date.now());
        }
      });

      it('records nothing for writes that change nothing', async (t) => {
        const store = await open(t);
        const plant = await store.plants.insert({ id: 1n, name: 'Fern' });
        await store.plants.update(1n, { name: 'Ivy' });
        await assert.rejects(store.plants.insert({ id: 1n, name: 'again' }), PlantExistsError);
        await assert.rejects(
          store.plants.update(1n, { name: 'x' }, { expected: plant }),
          PlantChangedError,
        );
        await assert.rejects(store.plants.delete(1n, { expected: plant }), PlantChangedError);
        assert.equal(await store.plants.update(2n, { name: 'x' }), undefined);
        assert.equal(await store.plants.delete(2n), false);
        const actions = (await store.audit.list({ limit: 10 })).map((entry) => entry.action);
        assert.deepEqual(actions, ['create', 'update']);
      });

      it('filters by plant, by time and pages by seq', async (t) => {
        const store = await open(t);
        for (let id = 1n; id <= 3n; id++) await store.plants.insert({ id, name: `p${id}` });
        await store.plants.delete(2n);
        const ofTwo = await store.audit.list({ plantId: 2n, limit: 10 });
        assert.deepEqual(
          ofTwo.map((entry) => entry.action),
          ['create', 'delete'],
        );
        const all = await store.audit.list({ limit: 2 });
        assert.equal(all.length, 2);
        const rest = await store.audit.list({ afterSeq: all[1]!.seq, limit: 10 });
        assert.deepEqual(
          rest.map((entry) => entry.plantId),
          [3n, 2n],
        );
        assert.deepEqual(
          await store.audit.list({ since: new Date(Date.now() + 60_000), limit: 10 }),
          [],
        );
        assert.equal((await store.audit.list({ since: new Date(0), limit: 10 })).length, 4);
      });

      it('prunes the entries written before a time, a batch at a time, keeping the rest', async (t) => {
        const store = await open(t);
        for (let id = 1n; id <= 3n; id++) await store.plants.insert({ id, name: `p${id}` });
        const [oldest] = await store.audit.list({ limit: 1 });
        const [last] = await store.audit.list({ plantId: 3n, limit: 1 });
        // The audit clock is the store's own: let it pass the millisecond of the last old
        // entry (the three may span several), so that the newer one is written after them all.
        while (Date.now() <= last!.at.getTime() + 1) await setImmediate();
        await store.plants.insert({ id: 4n, name: 'newer' });
        const newer = (await store.audit.list({ plantId: 4n, limit: 1 }))[0]!;
        assert.equal(await store.audit.prune(oldest!.at, 10), 0, 'none before the oldest');
        assert.equal(await store.audit.prune(newer.at, 2), 2, 'a full batch');
        assert.equal(await store.audit.prune(newer.at, 2), 1, 'the rest, fewer than a batch');
        const left = await store.audit.list({ limit: 10 });
        assert.deepEqual(
          left.map((entry) => entry.plantId),
          [4n],
        );
      });

      it('gives a server-assigned id its entry', async (t) => {
        const store = await open(t);
        const plant = await store.plants.insert({ name: 'auto' });
        const [entry] = await store.audit.list({ plantId: plant.id, limit: 10 });
        assert.deepEqual(entry?.after, shown(plant));
      });
    });

    describe('idempotency keys', () => {
      const at = new Date('2030-01-01T00:00:00.000Z');
      const claim = (overrides: Partial<IdempotencyClaim> = {}): IdempotencyClaim => ({
        tokenId: 1,
        key: 'k1',
        fingerprint: 'f1',
        at,
        ...overrides,
      });
      const later = (ms: number) => new Date(at.getTime() + ms);

      it('a new key is claimed; a retry in flight, with another body, is told so', async (t) => {
        const store = await open(t);
        assert.deepEqual(await store.idempotency.claim(claim()), { state: 'claimed' });
        assert.deepEqual(await store.idempotency.claim(claim()), { state: 'in-flight' });
        assert.deepEqual(await store.idempotency.claim(claim({ fingerprint: 'f2' })), {
          state: 'mismatch',
        });
      });

      it('keys are per token', async (t) => {
        const store = await open(t);
        await store.idempotency.claim(claim());
        assert.deepEqual(await store.idempotency.claim(claim({ tokenId: 2 })), {
          state: 'claimed',
        });
      });

      it('an insert settles its key with the plant, in the same write', async (t) => {
        const store = await open(t);
        await store.idempotency.claim(claim());
        const plant = await store.plants.insert(
          { name: 'Fern', tag: 'x' },
          { idempotencyKey: { tokenId: 1, key: 'k1' } },
        );
        assert.deepEqual(await store.idempotency.claim(claim({ at: later(1000) })), {
          state: 'answered',
          answer: { status: 201, plant },
        });
        // The answer is the plant as created, whatever happened to it since.
        await store.plants.delete(plant.id);
        const again = await store.idempotency.claim(claim({ at: later(2000) }));
        assert.deepEqual(again, { state: 'answered', answer: { status: 201, plant } });
      });

      it('insertWithKey creates with a new key, answers a known one as a claim would', async (t) => {
        const store = await open(t);
        const first = await store.plants.insertWithKey({ name: 'Fern' }, { claim: claim() });
        assert.equal(first.state, 'created');
        const { plant } = first as { plant: StoredPlant };
        const answered = { state: 'answered', answer: { status: 201, plant } };
        const retry = { claim: claim({ at: later(1000) }) };
        assert.deepEqual(await store.plants.insertWithKey({ name: 'Fern' }, retry), answered);
        assert.deepEqual(await store.idempotency.claim(claim({ at: later(1000) })), answered);
        assert.deepEqual(
          await store.plants.insertWithKey({ name: 'x' }, { claim: claim({ fingerprint: 'f2' }) }),
          { state: 'mismatch' },
        );
        // With a client's id too; the key, its token's.
        const own = await store.plants.insertWithKey(
          { id: 7n, name: 'Ivy' },
          { claim: claim({ tokenId: 2 }) },
        );
        assert.equal(own.state, 'created');
        assert.deepEqual(shown((own as { plant: StoredPlant }).plant), { id: 7n, name: 'Ivy' });
        // A key in flight is told so; one a claim would take over is left to the long way.
        await store.idempotency.claim(claim({ key: 'held' }));
        const held = (at: Date) => ({ claim: claim({ key: 'held', at }) });
        assert.deepEqual(await store.plants.insertWithKey({ name: 'x' }, held(at)), {
          state: 'in-flight',
        });
        const leaseOut = held(later(IDEMPOTENCY_LEASE_MS));
        assert.deepEqual(await store.plants.insertWithKey({ name: 'x' }, leaseOut), {
          state: 'long-way',
        });
        const expired = { claim: claim({ at: later(IDEMPOTENCY_KEY_TTL_MS) }) };
        assert.deepEqual(await store.plants.insertWithKey({ name: 'x' }, expired), {
          state: 'long-way',
        });
        assert.deepEqual(ids(await listed(store.plants, { limit: 10 })), [plant.id, 7n].sort());
        assert.equal((await store.audit.list({ limit: 10 })).length, 2);
      });

      it('insertWithKey refused writes nothing, and leaves the key new', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: 1n, name: 'Fern' });
        assert.deepEqual(
          await store.plants.insertWithKey({ id: 1n, name: 'x' }, { claim: claim() }),
          { state: 'long-way' },
        );
        assert.equal((await store.audit.list({ limit: 10 })).length, 1);
        assert.deepEqual(await store.idempotency.claim(claim()), { state: 'claimed' });
      });

      it('insertWithKey of one key at once creates one plant', async (t) => {
        const store = await open(t);
        const tries = await Promise.all(
          Array.from({ length: 8 }, () =>
            store.plants.insertWithKey({ name: 'Fern' }, { claim: claim() }),
          ),
        );
        const created = tries.filter((outcome) => outcome.state === 'created');
        assert.equal(created.length, 1);
        const { plant } = created[0] as { plant: StoredPlant };
        // The others found its answer, or met its key at the commit and go the long way.
        for (const outcome of tries.filter((other) => other.state !== 'created')) {
          assert.ok(outcome.state === 'answered' || outcome.state === 'long-way', outcome.state);
        }
        assert.deepEqual(ids(await listed(store.plants, { limit: 10 })), [plant.id]);
        assert.deepEqual(await store.idempotency.claim(claim()), {
          state: 'answered',
          answer: { status: 201, plant },
        });
      });

      it('an insert whose key is not claimed (freed, or answered) creates nothing', async (t) => {
        const store = await open(t);
        const key = { tokenId: 1, key: 'k1' };
        await assert.rejects(
          store.plants.insert({ name: 'a' }, { idempotencyKey: key }),
          KeyNotHeldError,
        );
        await store.idempotency.claim(claim());
        const first = await store.plants.insert({ name: 'b' }, { idempotencyKey: key });
        // Settled by the first insert: a second insert with it must not create or re-settle.
        await assert.rejects(
          store.plants.insert({ id: 5n, name: 'c' }, { idempotencyKey: key }),
          KeyNotHeldError,
        );
        assert.deepEqual(await listed(store.plants, { limit: 10 }), [shown(first)]);
        assert.deepEqual(await store.idempotency.claim(claim({ at: later(1) })), {
          state: 'answered',
          answer: { status: 201, plant: first },
        });
        assert.equal((await store.audit.list({ limit: 10 })).length, 1);
      });

      it('an insert that fails leaves its key unsettled', async (t) => {
        const store = await open(t);
        await store.plants.insert({ id: 1n, name: 'Fern' });
        await store.idempotency.claim(claim());
        await assert.rejects(
          store.plants.insert({ id: 1n, name: 'x' }, { idempotencyKey: { tokenId: 1, key: 'k1' } }),
          PlantExistsError,
        );
        assert.deepEqual(await store.idempotency.claim(claim()), { state: 'in-flight' });
      });

      it('a refusal is kept by settle; release frees a key still in flight only', async (t) => {
        const store = await open(t);
        await store.idempotency.claim(claim());
        const refusal = { name: 'plantExists', message: 'exists' } as const;
        await store.idempotency.settle({ tokenId: 1, key: 'k1' }, refusal);
        await store.idempotency.release({ tokenId: 1, key: 'k1' });
        assert.deepEqual(await store.idempotency.claim(claim()), {
          state: 'answered',
          answer: { refusal },
        });
        await store.idempotency.claim(claim({ key: 'k2' }));
        await store.idempotency.release({ tokenId: 1, key: 'k2' });
        assert.deepEqual(await store.idempotency.claim(claim({ key: 'k2' })), {
          state: 'claimed',
        });
      });

      it('a lease run out is taken over with the same body only; an expired key is new', async (t) => {
        const store = await open(t);
        await store.idempotency.claim(claim());
        const afterLease = later(IDEMPOTENCY_LEASE_MS);
        assert.deepEqual(
          await store.idempotency.claim(claim({ fingerprint: 'f2', at: afterLease })),
          { state: 'mismatch' },
        );
        assert.deepEqual(await store.idempotency.claim(claim({ at: afterLease })), {
          state: 'claimed',
        });
        await store.idempotency.settle(
          { tokenId: 1, key: 'k1' },
          { name: 'plantExists', message: 'exists' },
        );
        const expired = later(IDEMPOTENCY_LEASE_MS + IDEMPOTENCY_KEY_TTL_MS);
        assert.deepEqual(await store.idempotency.claim(claim({ fingerprint: 'f2', at: expired })), {
          state: 'claimed',
        });
      });
    });

    describe('ping and close', () => {
      it('ping resolves on an open store', async (t) => {
        const store = await open(t);
        await store.ping();
      });

      it('close resolves, a second close is harmless, and the store refuses work after', async (t) => {
        const store = await open(t);
        await store.close();
        await store.close();
        await assert.rejects(store.ping());
        // A read may refuse at once (SQLite) or as a promise (PostgreSQL).
        await assert.rejects(async () => store.plants.get(1n));
      });
    });
  });
}

forEachBackend((backend) => storeContract(async (t) => (await backend.fresh(t)).open()));
