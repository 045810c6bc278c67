import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import pino from 'pino';
import { pinoRequestLine } from '../../src/server/request-line.js';
import { redacted } from '../../src/http/app.js';
import type { RequestLogEntry } from '../../src/http/hooks/request-log.js';

// serve writes a request's line in one template instead of through pino: it must be the
// line pino would have written, field for field, whatever the fields hold.

function capture(level: string) {
  const lines: string[] = [];
  const destination = { write: (line: string) => lines.push(line) };
  const logger = pino(redacted({ level }), destination);
  return { lines, logger, fast: pinoRequestLine(logger, destination) };
}

const entries: RequestLogEntry[] = [
  {
    reqId: '0b7a4c2e-6f3b-4b8e-9d7c-2a1e5f0c3d4b',
    method: 'GET',
    route: '/plants/:id',
    url: '/plants/9223372036854775807',
    status: 200,
    durationMs: 0.37,
    client: '127.0.0.1',
    tokenId: 12,
  },
  {
    reqId: 'a"b\\c{}',
    method: 'DELETE',
    route: null,
    url: '/pl%C3%A4nts/"x"\\?q=é&\u2028',
    status: 404,
    durationMs: 12,
    client: '::ffff:10.0.0.1',
    tokenId: null,
  },
];

/** Checks that the template writes the line pino writes for `entry`, field for field. */
function assertSameLine(entry: RequestLogEntry) {
  const { lines, logger, fast } = capture('info');
  logger.info(entry, 'request');
  fast(entry);
  assert.equal(lines.length, 2);
  const [byPino, byTemplate] = lines.map((line) => {
    assert.ok(line.endsWith('}\n'));
    const parsed = JSON.parse(line) as Record<string, unknown>;
    assert.equal(typeof parsed.time, 'number');
    delete parsed.time;
    return parsed;
  });
  assert.deepEqual(byTemplate, byPino);
  assert.deepEqual(Object.keys(byTemplate!), Object.keys(byPino!), 'same order');
}

test('the line is the one pino writes for the same entry, time aside', () => {
  for (const entry of entries) assertSameLine(entry);
});

test('nothing is written when the level leaves info out', () => {
  for (const level of ['warn', 'silent']) {
    const { lines, fast } = capture(level);
    fast(entries[0]!);
    assert.deepEqual(lines, []);
  }
});

test('any text in the fields is written as pino writes it', () => {
  // A client's path and request id may hold anything a header or a path can: quotes,
  // backslashes, control characters, any Unicode, a lone surrogate.
  const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
  const text = fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary' }),
    fc.string({ unit: 'binary-ascii' }),
    fc.string({ unit: fc.oneof(loneSurrogate, fc.constantFrom('"', '\\', 'a')) }),
  );
  fc.assert(
    fc.property(text, text, text, text, fc.option(text), (reqId, method, url, client, route) =>
      assertSameLine({ ...entries[0]!, reqId, method, url, client, route }),
    ),
    { numRuns: 500 },
  );
});
