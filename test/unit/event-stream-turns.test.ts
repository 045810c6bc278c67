import assert from 'node:assert/strict';
import { setMaxListeners } from 'node:events';
import { test } from 'node:test';
import {
  CATCH_UP_BATCHES_PER_TURN,
  eventStream,
  FOLLOWERS_SHARING_PER_TURN,
} from '../../src/http/routes/event-stream.js';
import type { EventFeed } from '../../src/service/event-feed.js';
import { changeEvent, quietLog } from '../helpers/change-events.js';

// Streams reading the log, counted by turns of the event loop: however many open at once
// from an old position, a turn runs at most CATCH_UP_BATCHES_PER_TURN of their reads, the
// first read of each stream that goes to the log included; streams reading the same batch
// from memory go together, and its text is made once.

/**
 * A feed of `batches` full batches of 100 events, whose reads (all at hand) are recorded with
 * the turn they came in; those from `heldFrom` on come from memory. With `frames`, each
 * event's text is counted as it is made, and is long: a batch is more than a stream holds.
 */
function feedOf(batches: number, heldFrom = Infinity, frames?: { made: number }) {
  const reads: { after: bigint; turn: number }[] = [];
  const clock = { turn: 0 };
  const all = Array.from({ length: batches * 100 }, (_, i) => {
    const event = changeEvent(BigInt(i + 1));
    if (frames === undefined) return event;
    const data = `${event.data.slice(0, -1)},"notes":"${'x'.repeat(300)}"}`;
    return Object.defineProperty({ ...event }, 'data', {
      get: () => {
        frames.made += 1;
        return data;
      },
    });
  });
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

/**
 * A stream of `feed` after `after`, read as it comes (`paced`: in a macrotask of its own each
 * time, as a socket's drain comes): `done` once it sent position `last`.
 */
function open(feed: EventFeed, after: bigint, last: number, signal: AbortSignal, paced = false) {
  const state = { text: '', done: false };
  const stream = eventStream(
    feed,
    after,
    () => undefined,
    quietLog,
    signal,
    async () => true,
  );
  const take = (chunk: Buffer) => {
    // The end is all a test looks for: a long text is not kept whole.
    state.text = (state.text + chunk.toString()).slice(-1_000);
    state.done ||= state.text.includes(`id: ${last}\n`);
  };
  if (!paced) stream.on('data', take);
  else {
    const drain = () => {
      for (let chunk; (chunk = stream.read() as Buffer | null) !== null;) take(chunk);
    };
    stream.on('readable', () => setImmediate(drain));
  }
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

test('streams following from memory make the text of each batch once, a few a turn', async () => {
  // Two groups of streams at two positions in memory, interleaved; each client takes its
  // text in a macrotask of its own, as a socket's drain comes. Each event's text is counted.
  const frames = { made: 0 };
  const { feed, reads, clock } = feedOf(3, 0, frames);
  const gone = new AbortController();
  setMaxListeners(0, gone.signal);
  const streams = Array.from({ length: 400 }, (_, i) =>
    open(feed, i % 2 === 0 ? 0n : 50n, 300, gone.signal, true),
  );
  await turnUntil(clock, () => streams.every((stream) => stream.done));
  gone.abort();
  // 6 distinct batches (0, 100, 200 and 50, 150, 250), and the partial one at 250: without
  // keys, streams drifted apart at the gate and each made its own (1,200 batches' texts).
  assert.ok(frames.made <= 10 * 100, `${frames.made / 100} batches' texts made`);
  // The batches read after a full one, through the gate: the first reads are not gated (they
  // start in memory), nor those after a batch that was not full. A turn counted here may hold
  // the end of one of the gate's turns and the start of the next, hence twice its bound; each
  // key's 200 streams, let through together, would pass it.
  const gated = reads.filter((read) => [100n, 150n, 200n, 250n].includes(read.after));
  const perTurn = Array.from(
    { length: clock.turn + 1 },
    (_, turn) => gated.filter((read) => read.turn === turn).length,
  );
  const bound = 2 * (CATCH_UP_BATCHES_PER_TURN + FOLLOWERS_SHARING_PER_TURN);
  assert.ok(
    perTurn.every((count) => count <= bound),
    `gated reads a turn: ${perTurn.join(' ')}`,
  );
});
