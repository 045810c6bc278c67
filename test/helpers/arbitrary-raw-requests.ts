import fc from 'fast-check';
import { plantText } from './arbitrary-bodies.js';
import { fuzzPath, queryString, wellFormed } from './arbitrary-request-parts.js';
import {
  focusedRequest,
  type FuzzRequest,
  type Tokens,
  validRequest,
  withTokens,
} from './arbitrary-requests.js';

// fast-check generators of raw HTTP/1.x requests, as bytes on a socket: request lines,
// header lines and bodies Node's parser must refuse or read, and the focused and valid
// requests of arbitrary-requests.ts written out as well-formed HTTP/1.1.

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

export interface RawRequest {
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

export const rawRequest: fc.Arbitrary<RawRequest> = fc.oneof(
  { weight: 2, arbitrary: anyRawRequest },
  { weight: 1, arbitrary: focusedRequest.map(rawOf) },
  { weight: 1, arbitrary: validRequest.map(rawOf) },
);

export function rawBytes(req: RawRequest, tokens: Tokens): Buffer {
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

export function renderRaw(req: RawRequest): string {
  const text = rawBytes(req, {
    TOKEN: '{TOKEN}',
    READ_TOKEN: '{READ_TOKEN}',
    WRITE_TOKEN: '{WRITE_TOKEN}',
    EXPIRED_TOKEN: '{EXPIRED_TOKEN}',
  }).toString('latin1');
  const shown = text.length > 1_500 ? `${text.slice(0, 1_500)}... (${text.length} bytes)` : text;
  return `bytes (latin1, JSON-escaped): ${JSON.stringify(shown)}`;
}
