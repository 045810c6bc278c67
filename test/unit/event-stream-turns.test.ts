import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CATCH_UP_BATCHES_PER_TURN, eventStream } from '../../src/http/routes/event-stream.js';
import type { EventFeed } from '../../src/service/event-feed.js';
import { changeEvent, quietLog } from '../helpers/change-events.js';

// Streams reading the log, counted by turns of the event loop: however many open at once
// from an old position, a turn runs at most CATCH_UP_BATCHES_PER_TURN of their reads, the
// first read of each stream that goes to the log included; streams reading the same batch
// from memory read it in the same turn.

/**
 * A feed of `batches` full batches of 100 events, whose reads (all at hand) are recorded with
 * the turn they came in; those from `heldFrom` on come from memory.
 */
function feedOf(batches: number, heldFrom = Infinity) {
  const reads: { after: bigint; turn: number }[] = [];
  const clock = { turn: 0 };
  const all = Array.from({ length: batches * 100 }, (_, i) => changeEvent(BigInt(i + 1)));
  const feed = {
    isClosed: false,
    heartbeatMs: 60_000,
    tokenCheckMs: 60_000,
    follow: (position: bigint) => ({ position, close() {} }),
    inMemory: (position: bigint) => Number(position) >= heldFrom,
    after: async (after: bigint, limit: number) => {
      reads.push({ after, turn: clock.turn });
      return all.slice(Number(after), Number(after) + limit);
    },
    waitBeyond: (_after: bigint, _ms: number, signal?: AbortSignal) =>
      new Promise<boolean>((resolve) => {
        signal?.addEventListener('abort', () => resolve(false), { once: true });
      }),
  };
  return { feed: feed as unknown as EventFeed, reads, clock };
}

/** A stream of `feed` after `after`, read as it comes: `done` once it sent position `last`. */
function open(feed: EventFeed, after: bigint, last: number, signal: AbortSignal) {
  const state = { text: '', done: false };
  const stream = eventStream(
    feed,
    after,
    () => undefined,
    quietLog,
    signal,
    async () => true,
  );
  stream.on('data', (chunk: Buffer) => {
    state.text += chunk.toString();
    state.done ||= state.text.includes(`id: ${last}\n`);
  });
  return state;
}

/** Turns of the event loop until `done`, counted on `clock`. */
async function turnUntil(clock: { turn: number }, done: () => boolean): Promise<void> {
  while (!done()) {
    await new Promise((resolve) => setImmediate(resolve));
    clock.turn += 1;
    assert.ok(clock.turn < 1_000, 'not done after 1,000 turns');
  }
}

test('streams opened at once read at most a few batches a turn, their first ones too', async () => {
  const { feed, reads, clock } = feedOf(2);
  const gone = new AbortController();
  const streams = Array.from({ length: 20 }, () => open(feed, 0n, 200, gone.signal));
  await turnUntil(clock, () => streams.every((stream) => stream.done));
  gone.abort();
  const perTurn = Array.from(
    { length: clock.turn + 1 },
    (_, turn) => reads.filter((read) => read.turn === turn).length,
  );
  // Two full batches a stream, 40 reads: at most 4 a turn, so 10 turns at least.
  assert.ok(
    perTurn.every((count) => count <= CATCH_UP_BATCHES_PER_TURN),
    `reads a turn: ${perTurn.join(' ')}`,
  );
  assert.ok(clock.turn >= 40 / CATCH_UP_BATCHES_PER_TURN);
});

test('a stream that starts in memory does not wait behind streams catching up', async () => {
  const { feed, reads, clock } = feedOf(2, 150);
  const gone = new AbortController();
  const behind = Array.from({ length: 20 }, () => open(feed, 0n, 200, gone.signal));
  const near = open(feed, 150n, 200, gone.signal);
  await turnUntil(clock, () => near.done);
  assert.equal(reads.find((read) => read.after === 150n)?.turn, 0, 'read in the first turn');
  assert.ok(
    behind.some((stream) => !stream.done),
    'while others still catch up',
  );
  gone.abort();
});

test('streams following from memory read each batch together, in one turn', async () => {
  const { feed, reads, clock } = feedOf(3, 0);
  const gone = new AbortController();
  const streams = Array.from({ length: 20 }, () => open(feed, 0n, 300, gone.signal));
  await turnUntil(clock, () => streams.every((stream) => stream.done));
  gone.abort();
  // Gated one by one, 4 a turn, they drifted apart: each made the text of its batch itself.
  for (const after of [0n, 100n, 200n]) {
    const turns = new Set(reads.filter((read) => read.after === after).map((read) => read.turn));
    assert.equal(turns.size, 1, `the reads after ${after} came in turns ${[...turns].join(' ')}`);
  }
  assert.equal(reads.filter((read) => read.after === 200n).length, 20);
});
