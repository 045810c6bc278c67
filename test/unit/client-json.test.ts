import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseBody, stringifyBody } from '../../packages/client/src/json.js';
import { int64Shapes } from '../../packages/client/src/int64-shapes.js';
import {
  parseRateLimit,
  parseRateLimitPolicy,
  parseRetryAfter,
  PlantstoreError,
} from '../../packages/client/src/errors.js';
import { nextLink } from '../../packages/client/src/links.js';

const listShape = int64Shapes['GET /plants']!['200'];

test('ids in a list answer become exact bigints, other numbers stay numbers', () => {
  const text =
    '[{"id": 9007199254740993, "name": "a"}, {"id": -9223372036854775808, "name": "b"}, {"id": 1, "name": "c"}]';
  assert.deepEqual(parseBody(text, listShape), [
    { id: 9007199254740993n, name: 'a' },
    { id: -9223372036854775808n, name: 'b' },
    { id: 1n, name: 'c' },
  ]);
  assert.deepEqual(parseBody('{"error": 40401, "message": "x"}'), { error: 40401, message: 'x' });
});

test('an integer a JS number cannot hold stays exact where no int64 is expected', () => {
  assert.deepEqual(parseBody('{"n": 9007199254740993, "m": 9007199254740991, "f": 1.5}'), {
    n: 9007199254740993n,
    m: 9007199254740991,
    f: 1.5,
  });
});

test('parsing refuses malformed JSON and duplicate keys, and keeps __proto__ as data', () => {
  assert.throws(() => parseBody('{"id": 1,'), SyntaxError);
  assert.throws(() => parseBody('{"id": 1, "id": 2}'), /Duplicate key/);
  const parsed = parseBody('{"__proto__": {"polluted": 1}, "constructor": 5}') as Record<
    string,
    unknown
  >;
  assert.equal(Object.getPrototypeOf(parsed), Object.prototype);
  assert.deepEqual(Object.keys(parsed), ['__proto__', 'constructor']);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test('bodies are written with every digit of a bigint', () => {
  assert.equal(
    stringifyBody({ id: 9223372036854775807n, name: 'x', tag: undefined }),
    '{"id":9223372036854775807,"name":"x"}',
  );
  assert.throws(() => stringifyBody(undefined), TypeError);
});

test('the next page is the rel="next" target, resolved, with its id exact', () => {
  const base = new URL('http://h:1/plants?limit=2');
  const link = nextLink('</plants?limit=2&after=9223372036854775806>; rel="next"', base);
  assert.equal(link?.href, 'http://h:1/plants?limit=2&after=9223372036854775806');
  assert.equal(
    nextLink('<a>; rel="prev", </x?q=a,b;c>; title="a, b; c"; rel="last next"', base)?.href,
    'http://h:1/x?q=a,b;c',
  );
  assert.equal(nextLink('</p>; rel=next', base)?.pathname, '/p');
  assert.equal(nextLink('</p>; rel="prev"', base), undefined);
  assert.equal(nextLink(null, base), undefined);
});

test('RateLimit, RateLimit-Policy and Retry-After are read as the drafts and RFC 9110 say', () => {
  assert.deepEqual(parseRateLimit('"token";r=0;t=31, "failed-auth";r=99;t=5'), [
    { policy: 'token', remaining: 0, resetSeconds: 31 },
    { policy: 'failed-auth', remaining: 99, resetSeconds: 5 },
  ]);
  assert.deepEqual(parseRateLimitPolicy('"to\\"ken";q=3;w=60;pk=:YWI=:'), [
    { policy: 'to"ken', quota: 3, windowSeconds: 60 },
  ]);
  assert.deepEqual(parseRateLimit('token;r=1, "ok";r=2'), [{ policy: 'ok', remaining: 2 }]);
  assert.deepEqual(parseRateLimit(null), []);
  const now = Date.parse('2026-11-21T08:00:00Z');
  assert.equal(parseRetryAfter('31', now), 31);
  assert.equal(parseRetryAfter('Sat, 21 Nov 2026 08:00:10 GMT', now), 10);
  assert.equal(parseRetryAfter('Sat, 21 Nov 2026 07:00:00 GMT', now), 0);
  assert.equal(parseRetryAfter('soon', now), undefined);
  assert.equal(parseRetryAfter('-1', now), undefined);
  assert.equal(parseRetryAfter(null, now), undefined);
});

test('a PlantstoreError carries the status, the Error body and what the headers say', () => {
  const headers = new Headers({
    'retry-after': '7',
    ratelimit: '"token";r=0;t=7',
    'ratelimit-policy': '"token";q=3;w=60',
    'x-request-id': 'req-1',
  });
  const error = new PlantstoreError(429, { error: 42901, message: 'Slow down.' }, headers);
  assert.ok(error instanceof Error);
  assert.equal(error.name, 'PlantstoreError');
  assert.equal(error.message, '429 (42901) Slow down.');
  assert.equal(error.status, 429);
  assert.equal(error.code, 42901);
  assert.deepEqual(error.body, { error: 42901, message: 'Slow down.' });
  assert.equal(error.retryAfter, 7);
  assert.deepEqual(error.rateLimit, [{ policy: 'token', remaining: 0, resetSeconds: 7 }]);
  assert.deepEqual(error.rateLimitPolicy, [{ policy: 'token', quota: 3, windowSeconds: 60 }]);
  assert.equal(error.requestId, 'req-1');
  const bare = new PlantstoreError(502, '<html>', new Headers());
  assert.equal(bare.body, undefined);
  assert.equal(bare.code, undefined);
  assert.match(bare.message, /^502: the server answered without an Error body/);
});
