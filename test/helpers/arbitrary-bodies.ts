import fc from 'fast-check';
import { int64, SEED_IDS } from './arbitrary-request-parts.js';

// fast-check generators of request bodies: plants and patches valid and not, wrong types,
// deep nesting, strings around the size limit, junk JSON, invalid UTF-8 and other bytes.

export const quoted = (text: string) => JSON.stringify(text);
export const quotedPlant = (name: string) => `{"name":${quoted(name)}}`;

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

export const plantText: fc.Arbitrary<string> = fc
  .record(
    { id: jsonId, name: plantName.map(quoted), tag: plantTag.map(quoted) },
    { requiredKeys: ['name'] },
  )
  .map((r) => `{${Object.entries(r).map(([k, v]) => `"${k}":${v}`)}}`);

export const patchText: fc.Arbitrary<string> = fc
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

export const payload: fc.Arbitrary<string | Buffer | undefined> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(undefined) },
  { weight: 10, arbitrary: bodyText },
  { weight: 2, arbitrary: bodyBytes },
);
