import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { errorCatalogue } from '../../src/core/errors.js';
import { JSON_LIMITS, shapeViolation } from '../../src/api/json.js';

const { depth, arrayItems } = JSON_LIMITS;
const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
const array = (items: number) => `[${Array.from({ length: items }, () => '1').join(',')}]`;

describe('shapeViolation', () => {
  it('allows up to the limits and refuses one beyond', () => {
    assert.equal(shapeViolation(nested(depth)), undefined);
    assert.match(shapeViolation(nested(depth + 1)) ?? '', /nests deeper than 16 levels/);
    assert.equal(shapeViolation(`{"a":${array(arrayItems)}}`), undefined);
    assert.match(shapeViolation(`{"a":${array(arrayItems + 1)}}`) ?? '', /more than 1000 items/);
  });

  it('counts neither brackets nor commas inside strings, escaped quotes included', () => {
    const text = `{"name":"${'[,'.repeat(5000)}\\"${'{'.repeat(100)}"}`;
    assert.equal(shapeViolation(text), undefined);
  });

  it('counts the items of each array apart, and not the members of objects', () => {
    const half = array(arrayItems);
    assert.equal(shapeViolation(`[${half},${half}]`), undefined);
    const members = Array.from({ length: 5000 }, (_, i) => `"k${i}":1`).join(',');
    assert.equal(shapeViolation(`{${members}}`), undefined);
  });

  it('agrees with the depth of any JSON value', () => {
    const depthOf = (value: unknown): number =>
      value !== null && typeof value === 'object'
        ? 1 + Math.max(0, ...Object.values(value).map(depthOf))
        : 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: depth + 4 }), (value) => {
        const text = JSON.stringify(value);
        assert.equal(shapeViolation(text) === undefined, depthOf(value) <= depth, text);
      }),
      { seed: 20261121, numRuns: 300 },
    );
  });

  it('states the limits the catalogue message states', () => {
    const { message } = errorCatalogue.bodyTooComplex;
    assert.ok(message.includes(`${depth} levels`) && message.includes(`${arrayItems} items`));
  });
});
