import assert from 'node:assert/strict';
import { test } from 'node:test';
import { etagOf, matches, unchanged } from '../../src/core/etag.js';

// The entity tag is the plant's version (see core/plant.ts StoredPlant), written as a
// quoted token: the same version, the same tag, whichever process or Node answers.

const plant = (version: bigint) => ({ id: 1n, name: 'Fern', version });

test('the entity tag is the version, unsigned, in base 36, quoted', () => {
  assert.equal(etagOf(plant(1n)), '"1"');
  assert.equal(etagOf(plant(35n)), '"z"');
  assert.equal(etagOf(plant(-1n)), '"3w5e11264sgsf"', '2^64 - 1');
  assert.equal(etagOf(plant(-(2n ** 63n))), `"${(2n ** 63n).toString(36)}"`);
  assert.match(etagOf(plant(2n ** 63n - 1n)), /^"[0-9a-z]{1,13}"$/);
});

test('different versions give different tags, whatever else the plant holds', () => {
  const versions = [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 36n, -36n];
  assert.equal(new Set(versions.map((v) => etagOf(plant(v)))).size, versions.length);
  assert.equal(etagOf({ id: 2n, name: 'Ivy', tag: 'x', version: 7n }), etagOf(plant(7n)));
});

test('If-Match: * matches any tag; a list matches its members only, strongly', () => {
  const etag = etagOf(plant(42n));
  assert.ok(matches({ any: true }, etag));
  assert.ok(matches({ any: false, tags: ['"x"', etag] }, etag));
  assert.ok(!matches({ any: false, tags: [`W/${etag}`] }, etag));
});

test('If-None-Match compares weakly: W/"x" is the representation tagged "x"', () => {
  const etag = etagOf(plant(42n));
  assert.ok(unchanged({ any: true }, etag));
  assert.ok(unchanged({ any: false, tags: [`W/${etag}`] }, etag));
  assert.ok(unchanged({ any: false, tags: ['"x"', etag] }, etag));
  assert.ok(!unchanged({ any: false, tags: ['W/"x"', '"y"'] }, etag));
});
