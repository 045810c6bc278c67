import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { fingerprintOf, parseIdempotencyKey } from '../../src/core/idempotency.js';

// The Idempotency-Key header and the fingerprint a kept answer is matched by.

describe('parseIdempotencyKey', () => {
  it('reads a structured-field string, unescaping \\" and \\\\', () => {
    assert.equal(
      parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"'),
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    );
    assert.equal(parseIdempotencyKey('"a b"'), 'a b');
    assert.equal(parseIdempotencyKey('"say \\"hi\\" \\\\o/"'), 'say "hi" \\o/');
  });

  it('takes the same characters unquoted as the same key', () => {
    assert.equal(parseIdempotencyKey('order-42'), parseIdempotencyKey('"order-42"'));
  });

  it('refuses empty, too long, non-ASCII, badly escaped and repeated keys', () => {
    for (const bad of ['', '""', '"', '"abc', 'a b', '"a\\b"', '"é"', 'é', '"a", "b"', 'a"b']) {
      assert.equal(parseIdempotencyKey(bad), undefined, bad);
    }
    assert.equal(parseIdempotencyKey('x'.repeat(255)), 'x'.repeat(255));
    assert.equal(parseIdempotencyKey('x'.repeat(256)), undefined);
    assert.equal(parseIdempotencyKey(`"${'x'.repeat(256)}"`), undefined);
  });

  it('round-trips any printable ASCII key written as an sf-string', () => {
    const printable = fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
      minLength: 1,
      maxLength: 255,
    });
    fc.assert(
      fc.property(printable, (key) => {
        const header = `"${key.replace(/["\\]/g, '\\$&')}"`;
        assert.equal(parseIdempotencyKey(header), key);
      }),
      { seed: 20261121 },
    );
  });
});

describe('fingerprintOf', () => {
  it('is the plant asked for: equal for equal plants, different otherwise', () => {
    assert.equal(fingerprintOf({ name: 'a', tag: 'b' }), fingerprintOf({ tag: 'b', name: 'a' }));
    assert.notEqual(fingerprintOf({ name: 'a' }), fingerprintOf({ name: 'a', tag: 'b' }));
    assert.notEqual(fingerprintOf({ name: 'a' }), fingerprintOf({ id: 1n, name: 'a' }));
    assert.notEqual(fingerprintOf({ id: 1n, name: 'a' }), fingerprintOf({ id: 2n, name: 'a' }));
  });
});
