import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CATCH_UP_BATCHES_PER_TURN, eventStream } from '../../src/http/routes/event-stream.js';
import type { EventFeed } from '../../src/service/event-feed.js';
import { changeEvent, quietLog } from '../helpers/change-events.js';

// Streams reading the log, counted by turns of the event loop: however many open at once
// from an old position, a turn runs at most CATCH_UP_BATCHES_PER_TURN of their reads, the
// first read of each stream included.

/** A feed of `batches` full batches of 100 events, whose reads (all at hand) are counted. */
function feedOf(batches: number) {
  const calls = { reads: 0 };
  const all = Array.from({ length: batches * 100 }, (_, i) => changeEvent(BigInt(i + 1)));
  const feed = {
    isClosed: false,
    heartbeatMs: 60_000,
    tokenCheckMs: 60_000,
    follow: (position: bigint) => ({ position, close() {} }),
    after: async (after: bigint, limit: number) => {
      calls.reads += 1;
      return all.slice(Number(after), Number(after) + limit);
    },
    waitBeyond: (_after: bigint, _ms: number, signal?: AbortSignal) =>
      new Promise<boolean>((resolve) => {
        signal?.addEventListener('abort', () => resolve(false), { once: true });
      }),
  };
  return { feed: feed as unknown as EventFeed, calls };
}

test('streams opened at once read at most a few batches a turn, their first ones too', async () => {
  const { feed, calls } = feedOf(2);
  const streams = 20;
  const gone = new AbortController();
  let done = 0;
  for (let i = 0; i < streams; i++) {
    let text = '';
    const stream = eventStream(
      feed,
      0n,
      () => undefined,
      quietLog,
      gone.signal,
      async () => true,
    );
    stream.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('id: 200\n')) done += 1;
    });
  }
  const perTurn: number[] = [];
  let before = calls.reads;
  while (done < streams) {
    await new Promise((resolve) => setImmediate(resolve));
    perTurn.push(calls.reads - before);
    before = calls.reads;
    assert.ok(perTurn.length < 1_000, `not done after 1,000 turns: ${done}`);
  }
  gone.abort();
  // Two full batches a stream, 40 reads: at most 4 a turn, so 10 turns at least.
  assert.ok(
    perTurn.every((reads) => reads <= CATCH_UP_BATCHES_PER_TURN),
    `reads a turn: ${perTurn.join(' ')}`,
  );
  assert.ok(perTurn.length >= (2 * streams) / CATCH_UP_BATCHES_PER_TURN);
});
