import fc from 'fast-check';

// fast-check generators of the pieces of an HTTP request to the API, valid and not: ids,
// paths, query strings, Authorization and Content-Type values, other headers. For the fuzzers
// of test/http/fuzz.test.ts.

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

/** Plants that exist at the start of every run, so ids hit existing rows too. */
export const SEED_IDS = [0n, 1n, 7n, -1n, INT64_MIN];

/** Header values `inject` accepts (as Node's client does): visible ASCII, SP and HTAB. */
const HEADER_CHARS = [
  ' ',
  '\t',
  ...Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)),
];
export const headerText = (maxLength: number) =>
  fc.string({ unit: fc.constantFrom(...HEADER_CHARS), maxLength });

/** Lone surrogates as U+FFFD (String.prototype.toWellFormed is not in the ES2023 lib). */
export const wellFormed = (text: string): string => text.replace(/\p{Cs}/gu, '\uFFFD');

/** Percent-encodes (encodeURIComponent throws on lone surrogates). */
export const encode = (text: string): string => encodeURIComponent(wellFormed(text));

export const int64 = fc.bigInt({ min: INT64_MIN, max: INT64_MAX });

/** A path segment for /plants/{id}: valid, out of range, non-canonical, junk. */
export const idSegment: fc.Arbitrary<string> = fc.oneof(
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
export const fuzzPath: fc.Arbitrary<string> = fc.oneof(
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

export const queryString: fc.Arbitrary<string> = fc.oneof(
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
export const authorization: fc.Arbitrary<string | undefined> = fc.oneof(
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

export const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
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

export const extraHeaders: fc.Arbitrary<[string, string][]> = fc.array(
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
