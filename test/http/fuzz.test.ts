import assert from 'node:assert/strict';
import { connect, type AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import fc from 'fast-check';
import type { InjectOptions } from 'fastify';
import { TokenService } from '../../src/service/token-service.js';
import { body, setup, type TestApp } from '../helpers/setup.js';

// An HTTP fuzzer over every operation: random methods, paths, query strings, headers and
// bodies, first through `inject` (Fastify's whole request lifecycle), then as raw bytes
// to a listening server (Node's HTTP parser too). For every answer:
//   - the status is never 5xx, but 505 for an HTTP version other than 1.0 and 1.1;
//   - every 4xx carries exactly {"error": <int32 integer>, "message": <non-empty string>}
//     with Math.trunc(error / 100) === status (HEAD answers carry no body, by HTTP);
//   - a 405 names the methods that are allowed, and not the one refused;
//   - GET /healthz still answers 200 afterwards (and the listener is still up).
// Requests `call()` can check are also validated against the served OpenAPI document.
// And of the traffic as a whole: each plant operation both succeeded (2xx) and was refused
// (4xx), so generators that stopped producing valid (or invalid) requests do not pass.
//
// Bounded and deterministic: a fixed seed and a fixed number of runs. To reproduce or
// explore, set FUZZ_SEED (an integer) and/or FUZZ_RUNS (runs of the inject fuzzer; the raw
// one does a quarter as many). A failure names the seed, the shrunk request and the error.

const DEFAULT_SEED = 20_240_611;
const DEFAULT_INJECT_RUNS = 2_000;

function envInteger(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got ${text}`);
  return value;
}

const SEED = envInteger('FUZZ_SEED', DEFAULT_SEED);
const INJECT_RUNS = envInteger('FUZZ_RUNS', DEFAULT_INJECT_RUNS);
const RAW_RUNS = Math.max(1, Math.round(INJECT_RUNS / 4));

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const INT32_MIN = -(2n ** 31n);
const INT32_MAX = 2n ** 31n - 1n;

/** Plants that exist at the start of every run, so ids hit existing rows too. */
const SEED_IDS = [0n, 1n, 7n, -1n, INT64_MIN];

// ------------------------------------------------------------------ the fuzz runner

/**
 * Runs a property with the fixed seed; on failure, fails the test with the seed, the
 * shrunk counterexample (rendered as a request) and the error it produced.
 */
async function fuzz<T>(
  t: TestContext,
  name: string,
  arbitrary: fc.Arbitrary<T>,
  numRuns: number,
  predicate: (value: T) => Promise<void>,
  render: (value: T) => string,
): Promise<void> {
  const started = performance.now();
  const details = await fc.check(fc.asyncProperty(arbitrary, predicate), { seed: SEED, numRuns });
  const ms = Math.round(performance.now() - started);
  t.diagnostic(`${name}: ${details.numRuns} runs, seed ${SEED}, ${ms} ms`);
  if (!details.failed) return;
  const error = details.errorInstance;
  const counterexample = details.counterexample?.[0];
  assert.fail(
    [
      `${name} failed after ${details.numRuns} run(s) (shrunk ${details.numShrinks} time(s)).`,
      `Seed: FUZZ_SEED=${SEED} (fast-check seed ${details.seed}, path "${details.counterexamplePath}")`,
      `Reproduce: FUZZ_SEED=${SEED} FUZZ_RUNS=${INJECT_RUNS} node --import tsx --test test/http/fuzz.test.ts`,
      'Counterexample (request):',
      counterexample === undefined ? '(none)' : render(counterexample),
      'Counterexample (value):',
      counterexample === undefined ? '(none)' : fc.stringify(counterexample).slice(0, 2_000),
      'Error:',
      error instanceof Error ? error.message : String(error),
    ].join('\n'),
  );
}

// ------------------------------------------------------------------ answer properties

type HeaderGetter = (name: string) => string | undefined;

/**
 * The properties every answer must have, whichever way it was produced. `text` is the
 * body as received; for HEAD an empty body is expected (HTTP forbids one).
 */
function checkAnswer(method: string, status: number, header: HeaderGetter, text: string): void {
  const what = `${method} -> ${status} ${JSON.stringify(text.slice(0, 300))}`;
  assert.ok(Number.isInteger(status) && status >= 100 && status <= 599, `status: ${what}`);
  // The one 5xx a request can earn: a version other than HTTP/1.0 or 1.1 (505, 50501).
  const versionRefused = status === 505 && text.startsWith('{"error":50501,');
  assert.ok(status < 500 || versionRefused, `a 5xx answer: ${what}`);
  if (status === 405) {
    const allow = header('allow');
    assert.ok(allow !== undefined && allow.length > 0, `405 without Allow: ${what}`);
    const allowed = allow.split(',').map((m) => m.trim());
    assert.ok(!allowed.includes(method.toUpperCase()), `405 but Allow has ${method}: ${allow}`);
  }
  if (status < 400) return;
  if (method.toUpperCase() === 'HEAD' && text === '') return;
  assert.match(header('content-type') ?? '', /^application\/json\b/, `content-type: ${what}`);
  let parsed: unknown;
  try {
    parsed = body({ body: text }); // lossless: integers are bigints, duplicate keys refused
  } catch (error) {
    assert.fail(`the error body is not well-formed JSON (${String(error)}): ${what}`);
  }
  assert.ok(
    typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed),
    `not an object: ${what}`,
  );
  const record = parsed as Record<string, unknown>;
  assert.deepEqual(Object.keys(record).sort(), ['error', 'message'], `keys: ${what}`);
  const { error, message } = record;
  assert.ok(typeof error === 'bigint', `error is not an integer literal: ${what}`);
  assert.ok(error >= INT32_MIN && error <= INT32_MAX, `error is not an int32: ${what}`);
  assert.equal(Math.trunc(Number(error) / 100), status, `error code vs status: ${what}`);
  assert.ok(typeof message === 'string' && message.length > 0, `message: ${what}`);
}

// ------------------------------------------------------------------ what the traffic did

/** The plant operations, each of which the traffic must both succeed and be refused on. */
const OPERATIONS = [
  'GET /plants',
  'POST /plants',
  'GET /plants/{id}',
  'PATCH /plants/{id}',
  'DELETE /plants/{id}',
] as const;

/**
 * Answers per plant operation, 2xx and 4xx apart: a generator that stopped producing
 * valid requests (or invalid ones) would still pass "no 5xx", and test little.
 */
class Tally {
  private readonly counts = new Map<string, { succeeded: number; refused: number }>(
    OPERATIONS.map((operation) => [operation, { succeeded: 0, refused: 0 }]),
  );

  /** Counts an answer to `method` on `target` (path and query), if it is a plant operation. */
  add(method: string, target: string, status: number): void {
    const path = target.split(/[?#]/, 1)[0]!;
    const route =
      path === '/plants' ? '/plants' : /^\/plants\/[^/]+$/.test(path) ? '/plants/{id}' : '';
    const count = this.counts.get(`${method} ${route}`);
    if (count === undefined) return;
    if (status >= 200 && status < 300) count.succeeded += 1;
    else if (status >= 400 && status < 500) count.refused += 1;
  }

  toString(): string {
    return [...this.counts].map(([op, c]) => `${op} ${c.succeeded}/${c.refused}`).join(', ');
  }

  /** Asserts that every operation was both answered with a 2xx and refused with a 4xx. */
  assertBoth(name: string): void {
    for (const [operation, { succeeded, refused }] of this.counts) {
      assert.ok(succeeded > 0, `${name}: no ${operation} succeeded (2xx/4xx: ${this})`);
      assert.ok(refused > 0, `${name}: no ${operation} was refused (2xx/4xx: ${this})`);
    }
  }
}

// ------------------------------------------------------------------ generators: pieces

/** Header values `inject` accepts (as Node's client does): visible ASCII, SP and HTAB. */
const HEADER_CHARS = [
  ' ',
  '\t',
  ...Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)),
];
const headerText = (maxLength: number) =>
  fc.string({ unit: fc.constantFrom(...HEADER_CHARS), maxLength });

/** Lone surrogates as U+FFFD (String.prototype.toWellFormed is not in the ES2023 lib). */
const wellFormed = (text: string): string => text.replace(/\p{Cs}/gu, '\uFFFD');

/** Percent-encodes (encodeURIComponent throws on lone surrogates). */
const encode = (text: string): string => encodeURIComponent(wellFormed(text));

const int64 = fc.bigInt({ min: INT64_MIN, max: INT64_MAX });

/** A path segment for /plants/{id}: valid, out of range, non-canonical, junk. */
const idSegment: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...SEED_IDS).map(String) },
  { weight: 4, arbitrary: int64.map(String) },
  fc.constantFrom(
    String(INT64_MAX),
    String(INT64_MIN),
    '9223372036854775808',
    '-9223372036854775809',
    '18446744073709551616',
    '007',
    '+1',
    '-0',
    '00',
    '0x10',
    '1e3',
    '1.0',
    '1_000',
    ' 1',
    '١',
    '１',
    'NaN',
  ),
  fc.bigInt({ min: INT64_MAX + 1n, max: 10n ** 40n }).map(String),
  fc.bigInt({ min: -(10n ** 40n), max: INT64_MIN - 1n }).map(String),
  int64.map((n) => `0${n}`),
  int64.map((n) => `+${n}`),
  // Huge digit strings, some beyond the router's 16 KiB parameter limit.
  fc.integer({ min: 20, max: 20_000 }).map((n) => '9'.repeat(n)),
  // Percent-encoded junk and encoded look-alikes.
  fc.constantFrom(
    '%31',
    '%2B1',
    '%2d0',
    '%00',
    '%ff',
    '%',
    '%zz',
    '%2',
    '%C3%A9',
    '%E2%80%8B1',
    '%ED%A0%80',
    '%2F',
    '%2e%2e',
    '%20',
    '1%00',
  ),
  fc.string({ maxLength: 12 }).map(encode),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }),
  fc.constant(''),
);

/** Any path the fuzzer sends (without the query string). */
const fuzzPath: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constant('/plants') },
  { weight: 8, arbitrary: idSegment.map((id) => `/plants/${id}`) },
  fc.constantFrom(
    '/healthz',
    '/readyz',
    '/openapi.json',
    '/docs',
    '/docs/swagger-ui.css',
    '/docs/swagger-ui-bundle.js',
    '/docs/x',
    '/docs/__proto__',
    '/docs/constructor',
    '/',
    '/plants/',
    '//plants',
    '/plants//1',
    '/plants/1/extra',
    '/PLANTS',
    '/Plants/1',
    '/plants/1/',
    '/healthz/',
    '/nowhere',
    '/plants;x',
    '/plants%2F1',
    '/%70lants',
    '/plants/./1',
    '/plants/../healthz',
    '/plants\\1',
    '/__proto__',
    '/constructor',
    '/plants/__proto__',
  ),
  idSegment.map((id) => `/docs/${id}`),
);

const queryKey: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('limit', 'after', 'tag') },
  fc.constantFrom(
    '__proto__',
    'constructor',
    'prototype',
    'hasOwnProperty',
    'toString',
    'limit[]',
    'limit[0]',
    '__proto__[limit]',
    'LIMIT',
    'Tag',
    '',
    'a.b',
    'tag%00',
    '%ff',
    'limit%20',
    '%6Cimit',
  ),
  fc.string({ maxLength: 10 }).map(encode),
);

const queryValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    '1',
    '0',
    '-1',
    '100',
    '1000',
    '1001',
    '01',
    '+1',
    '%2B1',
    '%201',
    '1.0',
    '1e2',
    'NaN',
    '-0',
    String(INT64_MAX),
    String(INT64_MIN),
    '9223372036854775808',
    '999999999999999',
    '9999999999999999999999',
    '%00',
    '%ff',
    '%zz',
    '%',
    'a%20b',
    'a+b',
    '__proto__',
    'null',
    'true',
    '[]',
    '{}',
  ),
  fc.bigInt({ min: INT64_MIN - 10n, max: INT64_MAX + 10n }).map(String),
  fc.integer({ min: -5, max: 2_000 }).map(String),
  fc.string({ maxLength: 60 }).map(encode),
  fc.string({ unit: 'grapheme', maxLength: 10 }),
  fc.integer({ min: 45, max: 60 }).map((n) => 'x'.repeat(n)),
);

const queryString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constant('') },
  {
    weight: 4,
    arbitrary: fc
      .array(fc.tuple(queryKey, fc.option(queryValue, { freq: 8 })), {
        minLength: 1,
        maxLength: 5,
      })
      .map((pairs) => `?${pairs.map(([k, v]) => (v === null ? k : `${k}=${v}`)).join('&')}`),
  },
  fc.constantFrom(
    '?',
    '?&',
    '?&&=&',
    '?=',
    '?limit=1&limit=2',
    '?tag=a&tag=b',
    '?after=1&after=1',
    '?__proto__[limit]=1',
    '?__proto__=x&limit=1',
    '?constructor=x',
    '?limit=1#frag',
    '??limit=1',
    '?limit=1;after=2',
    '?limit=1&&after=0',
  ),
);

/** Authorization values; `{TOKEN}` and friends are replaced by real tokens when sent. */
const authorization: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 8, arbitrary: fc.constant('Bearer {TOKEN}') },
  { weight: 2, arbitrary: fc.constant(undefined) },
  fc.constantFrom(
    'bearer {TOKEN}',
    'BEARER   {TOKEN}',
    'Bearer {READ_TOKEN}',
    'Bearer {WRITE_TOKEN}',
    'Bearer {EXPIRED_TOKEN}',
    'Bearer',
    'Bearer ',
    'Bearer {TOKEN} extra',
    'Bearer\t{TOKEN}',
    'Bearer {TOKEN}=',
    'Bearer {TOKEN}, Bearer {TOKEN}',
    ' Bearer {TOKEN}',
    '{TOKEN}',
    'Basic dXNlcjpwYXNz',
    'Token {TOKEN}',
    'Digest username="x", realm="plantstore"',
    'Bearer pst_',
    `Bearer ${'A'.repeat(5_000)}`,
    '',
  ),
  headerText(60),
);

const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  fc.constantFrom(
    undefined,
    'application/json',
    'application/merge-patch+json',
    'application/json; charset=utf-8',
    'application/json; charset="utf-8"',
    'application/json; charset=UTF-8',
    'application/json;charset=utf-8',
    'application/merge-patch+json; charset=utf-8',
    'application/json; charset=latin1',
    'application/json; charset=utf-16',
    'application/json; charset=',
    'application/json; charset=utf-8; charset=latin1',
    'application/json; charset=utf-8junk',
    'application/json; boundary=x',
    'application/json;;',
    'application/json ',
    ' application/json',
    'APPLICATION/JSON',
    'application/json, text/plain',
    'application/jsonx',
    'application/*',
    'text/json',
    'text/plain',
    'multipart/form-data; boundary=x',
    'application/x-www-form-urlencoded',
    '',
    ';',
  ),
  fc
    .tuple(fc.constantFrom('application/json', 'application/merge-patch+json'), headerText(20))
    .map(([type, junk]) => `${type}; charset=${junk}`),
  headerText(40),
);

const extraHeaders: fc.Arbitrary<[string, string][]> = fc.array(
  fc.tuple(
    fc.constantFrom(
      'x-request-id',
      'accept',
      'accept-encoding',
      'content-encoding',
      'expect',
      'host',
      'connection',
      'origin',
      'x-forwarded-for',
      'if-none-match',
      'range',
      'cookie',
      'x-http-method-override',
      'if-match',
      'idempotency-key',
      '__proto__',
      'constructor',
    ),
    fc.oneof(
      headerText(40),
      fc.constantFrom(
        '100-continue',
        'gzip',
        'close',
        'upgrade',
        '*/*',
        'bytes=0-1',
        '*',
        '"k1"',
        'k1',
        '""',
      ),
    ),
  ),
  { maxLength: 3 },
);

// ------------------------------------------------------------------ generators: bodies

const quoted = (text: string) => JSON.stringify(text);
const quotedPlant = (name: string) => `{"name":${quoted(name)}}`;

const plantName: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ minLength: 1, maxLength: 100 }) },
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 100 }),
  fc.constantFrom('', ' ', '\t\n', 'a'.repeat(100), 'a'.repeat(101), 'x\u0000y', '\u0000', '🌱'),
);
const plantTag: fc.Arbitrary<string> = fc.oneof(
  fc.string({ minLength: 1, maxLength: 50 }),
  fc.constantFrom('', 'a'.repeat(50), 'a'.repeat(51), 't\u0000g'),
);
const jsonId: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...SEED_IDS).map(String),
  int64.map(String),
  fc.constantFrom(
    '1e400',
    '-1e400',
    '-0',
    '12.0',
    '1E2',
    '0.5',
    '9223372036854775808',
    '-9223372036854775809',
    '18446744073709551616',
    `1${'0'.repeat(400)}`,
    '-0.0',
    '0e0',
    '"12"',
    'null',
    'true',
    '[]',
    '{}',
  ),
);

const plantText: fc.Arbitrary<string> = fc
  .record(
    { id: jsonId, name: plantName.map(quoted), tag: plantTag.map(quoted) },
    { requiredKeys: ['name'] },
  )
  .map((r) => `{${Object.entries(r).map(([k, v]) => `"${k}":${v}`)}}`);

const patchText: fc.Arbitrary<string> = fc
  .record(
    {
      name: plantName.map(quoted),
      tag: fc.oneof(plantTag.map(quoted), fc.constant('null')),
      id: jsonId,
    },
    { requiredKeys: [] },
  )
  .map((r) => `{${Object.entries(r).map(([k, v]) => `"${k}":${v}`)}}`);

const wrongTypes: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom('id', 'name', 'tag', 'extra', '__proto__', 'constructor'),
    fc.constantFrom(
      'null',
      'true',
      '[]',
      '{}',
      '"12"',
      '12',
      '1e400',
      '-0',
      '12.0',
      '[["x"]]',
      '{"a":1}',
      '{"name":"x"}',
    ),
  )
  .map(([key, value]) => `{"name":"n",${quoted(key)}:${value}}`);

const deepNesting: fc.Arbitrary<string> = fc.oneof(
  // Unclosed or closed nesting, some far beyond any stack.
  fc
    .tuple(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('[', '{"a":'), fc.boolean())
    .map(([n, open, close]) => {
      const closing = open === '[' ? ']' : '}';
      return open.repeat(n) + (close ? `1${closing.repeat(n)}` : '');
    }),
  fc
    .integer({ min: 1, max: 12_000 })
    .map((n) => `{"name":"x","tag":${'['.repeat(n)}${']'.repeat(n)}}`),
);

const hugeStrings: fc.Arbitrary<string> = fc.oneof(
  // Around the 64 KiB limit (65,536 bytes), in one- and two-byte characters.
  fc.integer({ min: 65_400, max: 65_600 }).map((n) => `{"name":"${'a'.repeat(n)}"}`),
  fc.integer({ min: 32_700, max: 32_800 }).map((n) => `{"name":"${'é'.repeat(n)}"}`),
  fc.integer({ min: 60_000, max: 70_000 }).map((n) => `{"name":"n","tag":"${'t'.repeat(n)}"}`),
);

const junkText: fc.Arbitrary<string> = fc.constantFrom(
  '',
  ' ',
  'null',
  '[]',
  '"x"',
  '1',
  'true',
  '{',
  '}',
  '{"name":"x"',
  '{"name":"x"}}',
  '{"name":"x"} {"name":"y"}',
  "{'name':'x'}",
  '{name:"x"}',
  '{"name":"x",}',
  '{"name":"a","name":"b"}',
  '{"id":1,"id":1,"name":"a"}',
  '{"tag":"a","name":"x","tag":null}',
  '{"name":"a\u0000b"}',
  '{"name":"a\\u0000b"}',
  '\u0000',
  '{"name":"x"}\u0000',
  '{"name":"\\ud800"}',
  '{"name":"\\udc00\\ud800"}',
  '{"name":"\\ud83c\\udf31"}',
  '\uFEFF{"name":"x"}',
  '{"__proto__":{"name":"x"}}',
  '{"name":"x","__proto__":null}',
  '{"constructor":{"prototype":{"name":"x"}}}',
  '{"name":"x","tag":NaN}',
  '{"name":"x","tag":Infinity}',
);

const INVALID_UTF8 = [
  [0xff],
  [0xfe, 0xff],
  [0xc0, 0x80],
  [0xc3],
  [0xe2, 0x82],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0x80],
];

const bodyBytes: fc.Arbitrary<Buffer> = fc.oneof(
  fc
    .tuple(fc.constantFrom(...INVALID_UTF8), fc.constantFrom('name', 'tag', 'id'))
    .map(([bytes, key]) =>
      Buffer.concat([Buffer.from(`{"name":"n","${key}":"`), Buffer.from(bytes), Buffer.from('"}')]),
    ),
  fc.constantFrom(...INVALID_UTF8).map((bytes) => Buffer.from(bytes)),
  fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
  fc.constant(Buffer.from('{"name":"x"}', 'utf16le')),
);

const bodyText: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: plantText },
  { weight: 4, arbitrary: patchText },
  { weight: 2, arbitrary: wrongTypes },
  { weight: 3, arbitrary: junkText },
  { weight: 1, arbitrary: deepNesting },
  { weight: 1, arbitrary: hugeStrings },
  { weight: 1, arbitrary: fc.json() },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 100 }) },
);

const payload: fc.Arbitrary<string | Buffer | undefined> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(undefined) },
  { weight: 10, arbitrary: bodyText },
  { weight: 2, arbitrary: bodyBytes },
);

// ------------------------------------------------------------------ inject requests

interface FuzzRequest {
  method: string;
  url: string;
  /** Header name and value; values may hold `{TOKEN}` placeholders. */
  headers: [string, string][];
  payload: string | Buffer | undefined;
}

// Methods `inject` accepts: those Node knows, in upper or lower case. Inject refuses
// others itself (FOO, Patch), so those are sent raw below.
const injectMethod = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('GET', 'POST', 'PATCH', 'DELETE') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'PUT',
      'HEAD',
      'OPTIONS',
      'TRACE',
      'PROPFIND',
      'SEARCH',
      'PURGE',
      'QUERY',
      'get',
      'patch',
    ),
  },
);

function request(
  method: string,
  url: string,
  auth: string | undefined,
  type: string | undefined,
  extra: [string, string][],
  sent: string | Buffer | undefined,
): FuzzRequest {
  const headers: [string, string][] = [];
  if (auth !== undefined) headers.push(['authorization', auth]);
  if (type !== undefined) headers.push(['content-type', type]);
  return { method, url, headers: [...headers, ...extra], payload: sent };
}

/** Everything independent: mostly nonsense, reaching the early checks. */
const wildRequest: fc.Arbitrary<FuzzRequest> = fc
  .tuple(injectMethod, fuzzPath, queryString, authorization, contentType, extraHeaders, payload)
  .map(([method, path, query, auth, type, extra, sent]) =>
    request(method, path + query, auth, type, extra, sent),
  );

const mostlyEmpty = <T>(arbitrary: fc.Arbitrary<T>, empty: T) =>
  fc.oneof({ weight: 4, arbitrary: fc.constant(empty) }, { weight: 1, arbitrary });
const mostlyValidAuth = fc.oneof(
  { weight: 6, arbitrary: fc.constant<string | undefined>('Bearer {TOKEN}') },
  { weight: 1, arbitrary: authorization },
);
const noExtra: [string, string][] = [];
/** Mostly the id of a plant that exists, so that reads, updates and deletes succeed too. */
const focusedId = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...SEED_IDS).map(String) },
  { weight: 1, arbitrary: idSegment },
);

/** One operation at a time, mostly well-formed, so the later checks are reached too. */
const focusedRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  fc
    .tuple(queryString, mostlyValidAuth, mostlyEmpty(payload, undefined))
    .map(([query, auth, sent]) =>
      request('GET', `/plants${query}`, auth, undefined, noExtra, sent),
    ),
  fc
    .tuple(
      mostlyEmpty(queryString, ''),
      mostlyValidAuth,
      mostlyEmpty(contentType, 'application/json'),
      fc.oneof({ weight: 3, arbitrary: plantText }, { weight: 2, arbitrary: payload }),
    )
    .map(([query, auth, type, sent]) =>
      request('POST', `/plants${query}`, auth, type, noExtra, sent),
    ),
  fc
    .tuple(
      fc.constantFrom('GET', 'DELETE'),
      focusedId,
      mostlyEmpty(queryString, ''),
      mostlyValidAuth,
      mostlyEmpty(payload, undefined),
    )
    .map(([method, id, query, auth, sent]) =>
      request(method, `/plants/${id}${query}`, auth, undefined, noExtra, sent),
    ),
  fc
    .tuple(
      focusedId,
      mostlyEmpty(queryString, ''),
      mostlyValidAuth,
      fc.oneof(
        {
          weight: 4,
          arbitrary: fc.constantFrom('application/merge-patch+json', 'application/json'),
        },
        { weight: 1, arbitrary: contentType },
      ),
      fc.oneof({ weight: 3, arbitrary: patchText }, { weight: 2, arbitrary: payload }),
    )
    .map(([id, query, auth, type, sent]) =>
      request('PATCH', `/plants/${id}${query}`, auth, type, noExtra, sent),
    ),
  fc
    .tuple(
      fc.constantFrom('/healthz', '/readyz', '/openapi.json', '/docs', '/docs/swagger-ui.css'),
      mostlyEmpty(queryString, ''),
      mostlyEmpty(authorization, undefined),
      mostlyEmpty(payload, undefined),
      extraHeaders,
    )
    .map(([path, query, auth, sent, extra]) =>
      request('GET', path + query, auth, undefined, extra, sent),
    ),
);

/** A name any plant may have: letters and spaces, not blank. */
const plainName = fc
  .string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz ABC-'), maxLength: 30 })
  .map((text) => `p${text}`);
const seedId = fc.constantFrom(...SEED_IDS).map(String);
const asked = (method: string, url: string, type?: string, sent?: string) =>
  request(method, url, 'Bearer {TOKEN}', type, noExtra, sent);

/** Plain valid calls of each plant operation: the traffic must succeed, not only be refused. */
const validRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  fc.constant(asked('GET', '/plants')),
  plainName.map((name) => asked('POST', '/plants', 'application/json', quotedPlant(name))),
  seedId.map((id) => asked('GET', `/plants/${id}`)),
  fc
    .tuple(seedId, plainName)
    .map(([id, name]) =>
      asked('PATCH', `/plants/${id}`, 'application/merge-patch+json', quotedPlant(name)),
    ),
  seedId.map((id) => asked('DELETE', `/plants/${id}`)),
);

const injectRequest = fc.oneof(
  { weight: 3, arbitrary: focusedRequest },
  { weight: 2, arbitrary: wildRequest },
  { weight: 1, arbitrary: validRequest },
);

function preview(sent: string | Buffer | undefined): string {
  if (sent === undefined) return '(no body)';
  if (typeof sent === 'string') {
    const bytes = Buffer.byteLength(sent);
    return `${JSON.stringify(sent.slice(0, 400))}${sent.length > 400 ? '...' : ''} (${bytes} bytes)`;
  }
  return `<Buffer ${sent.subarray(0, 200).toString('hex')}${sent.length > 200 ? '...' : ''}> (${sent.length} bytes)`;
}

function renderRequest(req: FuzzRequest): string {
  const url =
    req.url.length > 300 ? `${req.url.slice(0, 300)}... (${req.url.length} chars)` : req.url;
  const lines = [`${req.method} ${JSON.stringify(url)}`];
  for (const [name, value] of req.headers)
    lines.push(`${name}: ${JSON.stringify(value.slice(0, 300))}`);
  lines.push('', preview(req.payload));
  return lines.join('\n');
}

type Tokens = Record<'TOKEN' | 'READ_TOKEN' | 'WRITE_TOKEN' | 'EXPIRED_TOKEN', string>;

const withTokens = (text: string, tokens: Tokens): string =>
  text.replace(
    /\{(TOKEN|READ_TOKEN|WRITE_TOKEN|EXPIRED_TOKEN)\}/g,
    (_m, name: keyof Tokens) => tokens[name],
  );

async function makeTokens(ctx: TestApp): Promise<Tokens> {
  // Issued an hour ago for a minute: expired, without waiting for it to expire.
  const anHourAgo = new TokenService(ctx.store.tokens, {
    now: () => new Date(Date.now() - 3_600_000),
  });
  const expired = (
    await anHourAgo.create({
      name: 'expired',
      scopes: ['plants:read', 'plants:write'],
      expiresInMs: 60_000,
    })
  ).token;
  return {
    TOKEN: ctx.token,
    READ_TOKEN: await ctx.newToken(['plants:read']),
    WRITE_TOKEN: await ctx.newToken(['plants:write']),
    EXPIRED_TOKEN: expired,
  };
}

/** Puts the seed plants back (a run may have deleted them); cheap when they are there. */
async function restoreSeedPlants(ctx: TestApp): Promise<void> {
  for (const id of SEED_IDS) {
    if ((await ctx.store.plants.get(id)) === undefined) {
      await ctx.store.plants.insert({ id, name: `seed ${id}`, tag: 'seed' });
    }
  }
}

// A path the OpenAPI checker in `call()` reads the same way the router does: no percent
// escapes, no dot segments, nothing the URL parser would rewrite before routing.
const PLAIN_PATH = /^\/[A-Za-z0-9_\-./]*$/;
const DOT_SEGMENT = /(^|\/)\.\.?(\/|$)/;

function checkable(req: FuzzRequest): boolean {
  const path = req.url.split('?', 1)[0]!;
  return (
    req.method.toUpperCase() !== 'HEAD' &&
    !req.url.includes('#') &&
    PLAIN_PATH.test(path) &&
    !DOT_SEGMENT.test(path) &&
    !path.startsWith('//')
  );
}

async function healthy(ctx: TestApp): Promise<void> {
  const res = await ctx.app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(res.statusCode, 200, `GET /healthz afterwards: ${res.statusCode} ${res.body}`);
  assert.equal(res.body, '{"status":"ok"}');
}

test('inject fuzzer: no 5xx, every 4xx an Error body, /healthz stays 200', async (t) => {
  const ctx = await setup(t);
  const tokens = await makeTokens(ctx);
  const tally = new Tally();
  let viaCall = 0;
  await fuzz(
    t,
    'inject fuzzer',
    injectRequest,
    INJECT_RUNS,
    async (req) => {
      await restoreSeedPlants(ctx);
      const headers = Object.fromEntries(
        req.headers.map(([name, value]) => [name, withTokens(value, tokens)]),
      );
      const options = { method: req.method, url: req.url, headers, payload: req.payload };
      let res;
      if (checkable(req)) {
        viaCall += 1;
        // Also validated against the served OpenAPI document (status, schema, headers).
        res = await ctx.call({ ...options, token: null });
      } else {
        res = await ctx.app.inject(options as InjectOptions);
      }
      const header: HeaderGetter = (name) => {
        const value = res.headers[name];
        return value === undefined ? undefined : String(value);
      };
      checkAnswer(req.method, res.statusCode, header, res.body);
      tally.add(req.method.toUpperCase(), req.url, res.statusCode);
      await healthy(ctx);
    },
    renderRequest,
  );
  t.diagnostic(`inject fuzzer: ${viaCall} request(s) also checked against the OpenAPI document`);
  t.diagnostic(`inject fuzzer, 2xx/4xx per operation: ${tally}`);
  tally.assertBoth('inject fuzzer');
});

// ------------------------------------------------------------------ raw requests

// Raw requests are byte strings: every char below is one byte (latin1); unicode is
// written as its UTF-8 bytes.
const utf8Bytes = (text: string) => Buffer.from(wellFormed(text), 'utf8').toString('latin1');

const rawMethod = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('GET', 'POST', 'PATCH', 'DELETE') },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'PUT',
      'HEAD',
      'OPTIONS',
      'FOO',
      'get',
      'Post',
      'CONNECT',
      'TRACE',
      'PRI',
      'M-SEARCH',
      'GE T',
      'GET\x00',
      '',
      '\xff',
      'G\x7fET',
    ),
  },
  fc.string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZ-_!~'), maxLength: 8 }),
);

const rawTarget = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(fuzzPath, queryString).map(([p, q]) => utf8Bytes(p + q)) },
  fc.constantFrom(
    '*',
    '',
    'http://localhost/healthz',
    'http://localhost/plants/1',
    'https://x:99999/plants',
    'localhost:80',
    '//plants',
    '/plants/\xc3\xa9',
    '/plants/\xe9',
    '/plants/\x00',
    '/plants/\x7f',
    '/plants/\x01',
    '/plants/\t1',
    '/\xff',
    '/plants?limit=\x01',
    '/plants?tag=\xff',
    `/plants/${'1'.repeat(17_000)}`,
  ),
);

const rawVersion = fc.oneof(
  { weight: 10, arbitrary: fc.constant('HTTP/1.1') },
  fc.constantFrom(
    'HTTP/1.0',
    'HTTP/2.0',
    'HTTP/0.9',
    'HTTP/1.2',
    'HTTP/9.9',
    'http/1.1',
    'HTTP/1',
    'HTTP/1.1 extra',
    'HTTP/11',
    'HTTPS/1.1',
    '',
  ),
);

const requestLine = fc
  .tuple(
    rawMethod,
    rawTarget,
    rawVersion,
    fc.oneof({ weight: 10, arbitrary: fc.constant(' ') }, fc.constantFrom('  ', '\t', '')),
  )
  .map(([method, target, version, sep]) =>
    version === '' ? `${method}${sep}${target}` : `${method}${sep}${target}${sep}${version}`,
  );

const rawHeaderLine = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      'Authorization: Bearer {TOKEN}',
      'Content-Type: application/json',
      'Content-Type: application/merge-patch+json',
      'Content-Length: {LEN}',
      'Connection: close',
    ),
  },
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      'Connection: keep-alive',
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Upgrade: h2c',
      'HTTP2-Settings: AAMAAABkAAQAAP__',
      'Expect: 100-continue',
      'Expect: 100-Continue',
      'Expect: foo',
      'Expect:',
      'Transfer-Encoding: chunked',
      'Transfer-Encoding: gzip, chunked',
      'Transfer-Encoding: identity',
      'Transfer-Encoding: chunked, chunked',
      'Transfer-Encoding: xchunked',
      'Content-Length: 0',
      'Content-Length: -1',
      'Content-Length: 1, 1',
      'Content-Length: {LEN}, {LEN}',
      'Content-Length: 99999999999999999999',
      'Content-Length: abc',
      'Content-Length: +5',
      'Content-Length: {LEN-1}',
      'Content-Length: {LEN+1}',
      'Content-Encoding: gzip',
      'Authorization: Bearer {READ_TOKEN}',
      'Authorization: Basic Zm9vOmJhcg==',
      'Authorization: Bearer {TOKEN}\xff',
      'Authorization: Bearer \xe9',
      'Content-Type: text/plain',
      'Content-Type: application/json; charset=\xff',
      'X-Request-Id: \xff\xfe',
      'X-Request-Id: ok-id',
      'Host: other',
      'Host:',
      ' folded: continuation',
      '\tobs-fold',
      'NoColonHere',
      ': empty-name',
      'Bad Name: x',
      'Bad\x00Name: x',
      'X-Nul: a\x00b',
      'X-Ctl: a\x01b',
      'X-Del: a\x7fb',
      'X-High: \x80\xff',
      'X-Cr: a\rb',
      'Host : x',
      `X-Big: ${'a'.repeat(17_000)}`,
    ),
  },
  fc
    .tuple(
      fc.string({
        unit: fc.constantFrom(...'abcXYZ-_:; \x00\x7f\xff'),
        minLength: 0,
        maxLength: 10,
      }),
      fc.string({ unit: 'binary-ascii', maxLength: 30 }),
    )
    .map(([name, value]) => `${name}: ${value}`),
);

const rawBody = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  { weight: 3, arbitrary: plantText.map(utf8Bytes) },
  fc.constantFrom(
    '{',
    '{"name":"x"}',
    '5\r\nhello\r\n0\r\n\r\n',
    'c\r\n{"name":"x"}\r\n0\r\n\r\n',
    '0\r\n\r\n',
    'zz\r\n',
    'ffffffffffffffffff\r\n',
    '1;ext=\xff\r\nx\r\n0\r\n\r\n',
    '{"name":"\xff"}',
    '{"name":"\xc3\xa9"}',
    '\x00\x00\x00',
  ),
  fc.string({ unit: 'binary-ascii', maxLength: 40 }),
);

interface RawRequest {
  line: string;
  host: boolean;
  headers: string[];
  eol: string;
  body: string;
}

const anyRawRequest: fc.Arbitrary<RawRequest> = fc.record({
  line: requestLine,
  host: fc.oneof(
    { weight: 9, arbitrary: fc.constant(true) },
    { weight: 1, arbitrary: fc.constant(false) },
  ),
  headers: fc.array(rawHeaderLine, { maxLength: 5 }),
  eol: fc.oneof(
    { weight: 12, arbitrary: fc.constant('\r\n') },
    fc.constantFrom('\n', '\r', '\n\r'),
  ),
  body: rawBody,
});

/** A focused request as bytes: well-formed HTTP/1.1, so the raw traffic succeeds too. */
function rawOf(req: FuzzRequest): RawRequest {
  const { payload: sent } = req;
  return {
    line: `${req.method} ${utf8Bytes(req.url)} HTTP/1.1`,
    host: true,
    headers: [
      ...req.headers.map(([name, value]) => `${name}: ${value}`),
      ...(sent === undefined ? [] : ['Content-Length: {LEN}']),
    ],
    eol: '\r\n',
    body:
      sent === undefined
        ? ''
        : typeof sent === 'string'
          ? utf8Bytes(sent)
          : sent.toString('latin1'),
  };
}

const rawRequest: fc.Arbitrary<RawRequest> = fc.oneof(
  { weight: 2, arbitrary: anyRawRequest },
  { weight: 1, arbitrary: focusedRequest.map(rawOf) },
  { weight: 1, arbitrary: validRequest.map(rawOf) },
);

function rawBytes(req: RawRequest, tokens: Tokens): Buffer {
  const length = Buffer.byteLength(req.body, 'latin1');
  const headers = (req.host ? ['Host: localhost', ...req.headers] : req.headers).map((line) =>
    withTokens(line, tokens)
      .replaceAll('{LEN}', String(length))
      .replaceAll('{LEN-1}', String(Math.max(0, length - 1)))
      .replaceAll('{LEN+1}', String(length + 1)),
  );
  const head = [req.line, ...headers].join(req.eol);
  return Buffer.from(`${head}${req.eol}${req.eol}${req.body}`, 'latin1');
}

function renderRaw(req: RawRequest): string {
  const text = rawBytes(req, {
    TOKEN: '{TOKEN}',
    READ_TOKEN: '{READ_TOKEN}',
    WRITE_TOKEN: '{WRITE_TOKEN}',
    EXPIRED_TOKEN: '{EXPIRED_TOKEN}',
  }).toString('latin1');
  const shown = text.length > 1_500 ? `${text.slice(0, 1_500)}... (${text.length} bytes)` : text;
  return `bytes (latin1, JSON-escaped): ${JSON.stringify(shown)}`;
}

const HEALTH_REQUEST = Buffer.from(
  'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
  'latin1',
);

/**
 * Writes the bytes and resolves with everything the server sends back until it closes.
 * With `sentinel`, a `GET /healthz` with `Connection: close` follows the bytes, so the
 * server closes the connection itself once it has answered. Only when it has not closed
 * after `graceMs` (the fuzzed request's framing swallowed the sentinel: a Content-Length
 * or chunked body still incomplete) does the client half-close, making Node's parser
 * finish. Half-closing right away would race with the answer: Node treats the client's
 * FIN as an abort, and an answer still in the making (e.g. after `Expect: 100-continue`
 * and an asynchronous handler) could be dropped, which no real client provokes.
 */
function exchange(port: number, bytes: Buffer, sentinel: boolean): Promise<Buffer> {
  const graceMs = 500;
  const timeoutMs = 3_000;
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () =>
      socket.write(sentinel ? Buffer.concat([bytes, HEALTH_REQUEST]) : bytes),
    );
    const chunks: Buffer[] = [];
    const grace = setTimeout(() => socket.end(), graceMs);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection was not closed within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // A reset after the answer (the server closing with bytes still unread) is fine.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(grace);
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
  });
}

interface RawAnswer {
  status: number;
  headers: Map<string, string>;
  body: string;
}

function dechunk(data: Buffer, from: number): { body: Buffer; end: number } {
  const parts: Buffer[] = [];
  let at = from;
  for (;;) {
    const eol = data.indexOf('\r\n', at);
    assert.ok(eol >= 0, 'a truncated chunked body');
    const size = Number.parseInt(data.subarray(at, eol).toString('latin1'), 16);
    assert.ok(Number.isInteger(size) && size >= 0, 'a malformed chunk size');
    at = eol + 2;
    if (size === 0) {
      const end = data.indexOf('\r\n\r\n', at - 2);
      return { body: Buffer.concat(parts), end: end < 0 ? data.length : end + 4 };
    }
    parts.push(data.subarray(at, at + size));
    at += size + 2;
  }
}

/** Splits what the server sent into its final answers (1xx interim answers skipped). */
function parseAnswers(data: Buffer, firstMethod: string): RawAnswer[] {
  const answers: RawAnswer[] = [];
  let at = 0;
  while (at < data.length) {
    const headEnd = data.indexOf('\r\n\r\n', at);
    assert.ok(
      headEnd >= 0,
      `an incomplete answer: ${JSON.stringify(data.subarray(at, at + 300).toString('latin1'))}`,
    );
    const [statusLine = '', ...lines] = data.subarray(at, headEnd).toString('latin1').split('\r\n');
    const match = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine);
    assert.ok(match, `not an HTTP status line: ${JSON.stringify(statusLine)}`);
    const status = Number(match[1]);
    const headers = new Map<string, string>();
    for (const line of lines) {
      const colon = line.indexOf(':');
      assert.ok(colon > 0, `a malformed answer header: ${JSON.stringify(line)}`);
      headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    at = headEnd + 4;
    if (status < 200) continue;
    const rest = data.subarray(at);
    const length = headers.get('content-length');
    let bodyBytes: Buffer;
    if (
      status === 204 ||
      status === 304 ||
      // The answer to a HEAD request has no body, unless Node's parser refused the request
      // before knowing its method (then the raw error answer has its body).
      (answers.length === 0 &&
        firstMethod === 'HEAD' &&
        (rest.length === 0 || rest.subarray(0, 5).toString('latin1') === 'HTTP/'))
    ) {
      bodyBytes = Buffer.alloc(0);
    } else if (length !== undefined) {
      const n = Number(length);
      assert.ok(Number.isInteger(n) && n >= 0, `a bad answer Content-Length: ${length}`);
      assert.ok(rest.length >= n, `an answer shorter than its Content-Length ${n}`);
      bodyBytes = rest.subarray(0, n);
    } else if (/chunked/i.test(headers.get('transfer-encoding') ?? '')) {
      const { body: decoded, end } = dechunk(data, at);
      bodyBytes = decoded;
      at = end - bodyBytes.length; // so that `at += bodyBytes.length` lands on `end`
    } else {
      bodyBytes = rest;
    }
    at += bodyBytes.length;
    answers.push({ status, headers, body: bodyBytes.toString('utf8') });
  }
  return answers;
}

test('raw HTTP fuzzer: no 5xx, every 4xx an Error body, the server stays up', async (t) => {
  const ctx = await setup(t);
  const tokens = await makeTokens(ctx);
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = ctx.app.server.address() as AddressInfo;
  const tally = new Tally();
  let answered = 0;
  await fuzz(
    t,
    'raw HTTP fuzzer',
    rawRequest,
    RAW_RUNS,
    async (req) => {
      await restoreSeedPlants(ctx);
      const bytes = rawBytes(req, tokens);
      const method = req.line.split(/[ \t]/, 1)[0]!;
      const answers = parseAnswers(await exchange(port, bytes, true), method);
      // At least the fuzzed request's answer, or the sentinel's when the bytes held no
      // request (only empty lines) or a complete one that the server closed after.
      assert.ok(answers.length > 0, 'no answer');
      answered += answers.length;
      // The first answer is to the fuzzed request, unless its bytes held none.
      const [, target = ''] = req.line.split(/[ \t]+/);
      tally.add(method, target, answers[0]!.status);
      for (const answer of answers) {
        // Only the first answer can be to a HEAD (see parseAnswers); the bytes after the
        // fuzzed request (its surplus body, the sentinel) never start with HEAD.
        const asked = answer === answers[0] ? method : 'GET';
        checkAnswer(asked, answer.status, (name) => answer.headers.get(name), answer.body);
      }
      assert.ok(ctx.app.server.listening, 'the server stopped listening');
      const [health] = parseAnswers(await exchange(port, HEALTH_REQUEST, false), 'GET');
      assert.equal(health?.status, 200, 'GET /healthz afterwards');
      assert.equal(health.body, '{"status":"ok"}');
    },
    renderRaw,
  );
  t.diagnostic(`raw HTTP fuzzer: ${answered} answer(s) checked`);
  t.diagnostic(`raw HTTP fuzzer, 2xx/4xx per operation: ${tally}`);
  tally.assertBoth('raw HTTP fuzzer');
});
