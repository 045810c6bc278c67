import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatEntry, parseSince } from '../../src/cli/audit-command.js';

// The pieces of `plantstore audit` that need no database: reading --since, printing a line.

describe('parseSince', () => {
  const now = new Date('2026-11-21T12:00:00.000Z');
  it('reads dates, date-times with a zone, and durations back from now', () => {
    assert.equal(parseSince('2026-11-20', now).toISOString(), '2026-11-20T00:00:00.000Z');
    assert.equal(
      parseSince('2026-11-20T08:30:00+01:00', now).toISOString(),
      '2026-11-20T07:30:00.000Z',
    );
    assert.equal(parseSince('90m', now).toISOString(), '2026-11-21T10:30:00.000Z');
    assert.equal(parseSince('2d', now).toISOString(), '2026-11-19T12:00:00.000Z');
  });
  it('refuses what is not a time', () => {
    for (const bad of ['', 'now', '2026-13-01', '2026-11-20T08:30', '0m', '12']) {
      assert.throws(() => parseSince(bad, now), bad);
    }
  });
});

describe('formatEntry', () => {
  it('prints one line with exact ids and a dash for no plant', () => {
    const line = formatEntry({
      seq: 12n,
      at: new Date('2026-11-21T12:00:00.000Z'),
      action: 'create',
      plantId: -9223372036854775808n,
      tokenId: null,
      requestId: null,
      before: null,
      after: { id: -9223372036854775808n, name: 'a "b"' },
    });
    assert.equal(
      line,
      '12  2026-11-21T12:00:00.000Z  create  plant=-9223372036854775808  token=-  request=-  before=-  after={"id":-9223372036854775808,"name":"a \\"b\\""}',
    );
  });
});
