import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { etagOf, matches } from '../../src/core/etag.js';

// Entity tags must not change with the Node version that computes them: instances of one
// deployment may run different ones, and clients keep tags across restarts.

test('the entity tag is the first 27 base64url characters of the SHA-256 of the plant', () => {
  for (const plant of [
    { id: 1n, name: 'Fern' },
    { id: -9223372036854775808n, name: 'Ivy "the climber"', tag: 'shade' },
    { id: 9223372036854775807n, name: 'Moss 🌱', tag: 'wet' },
  ]) {
    const identity = JSON.stringify([plant.id.toString(), plant.name, plant.tag ?? null]);
    const digest = createHash('sha256').update(identity).digest('base64url');
    assert.equal(etagOf(plant), `"${digest.slice(0, 27)}"`);
  }
});

test('tags differ when id, name or tag differ, and a missing tag is not an empty one', () => {
  const tags = new Set(
    [
      { id: 1n, name: 'Fern' },
      { id: 2n, name: 'Fern' },
      { id: 1n, name: 'Fern ' },
      { id: 1n, name: 'Fern', tag: '' },
      { id: 1n, name: 'Fern', tag: 'null' },
    ].map(etagOf),
  );
  assert.equal(tags.size, 5);
});

test('If-Match: * matches any tag; a list matches its members only, strongly', () => {
  const etag = etagOf({ id: 1n, name: 'Fern' });
  assert.ok(matches({ any: true }, etag));
  assert.ok(matches({ any: false, tags: ['"x"', etag] }, etag));
  assert.ok(!matches({ any: false, tags: [`W/${etag}`] }, etag));
});
