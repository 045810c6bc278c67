import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCorsOrigins } from '../../src/api/cors-origins.js';

test('--cors-origins takes origins as browsers send them, or * alone', () => {
  assert.equal(parseCorsOrigins('*'), '*');
  assert.equal(parseCorsOrigins(' * '), '*');
  assert.deepEqual(parseCorsOrigins(''), []);
  assert.deepEqual(
    parseCorsOrigins('https://a.example, http://127.0.0.1:3000,,https://a.example'),
    ['https://a.example', 'http://127.0.0.1:3000'],
  );
  for (const [text, message] of [
    ['https://a.example/', /write it as https:\/\/a\.example$/],
    ['https://A.example', /write it as https:\/\/a\.example$/],
    ['https://a.example:443', /write it as https:\/\/a\.example$/],
    ['https://a.example/app', /write it as https:\/\/a\.example$/],
    ['a.example', /scheme:\/\/host\[:port\]/],
    ['null', /scheme:\/\/host\[:port\]/],
    ['file:///tmp/x', /scheme:\/\/host\[:port\]/],
    ['*,https://a.example', /give it alone/],
  ] as const) {
    assert.throws(() => parseCorsOrigins(text), message, text);
  }
});
