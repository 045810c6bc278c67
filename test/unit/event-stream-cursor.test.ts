import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { eventStream } from '../../src/http/routes/event-stream.js';
import type { EventFeed } from '../../src/service/event-feed.js';
import type { FeedCursor } from '../../src/service/recent-events.js';
import { changeEvent, quietLog } from '../helpers/change-events.js';

// An event stream's cursor, which tells the feed what it may drop from memory
// (RecentEvents.forgetRead): moved on as the stream sends, closed however the stream ends.
// Against a feed of two events that then waits until the stream stops it.

function twoEvents() {
  const cursors: (FeedCursor & { closed: boolean })[] = [];
  let waiting: () => void = () => {};
  const waited = new Promise<void>((resolve) => {
    waiting = resolve;
  });
  const feed = {
    isClosed: false,
    heartbeatMs: 60_000,
    tokenCheckMs: 60_000,
    inMemory: () => true,
    follow(position: bigint) {
      const cursor = {
        position,
        closed: false,
        close() {
          cursor.closed = true;
        },
      };
      cursors.push(cursor);
      return cursor;
    },
    after: async (after: bigint) =>
      after < 2n ? [changeEvent(1n), changeEvent(2n)].slice(Number(after)) : [],
    waitBeyond(_after: bigint, _ms: number, signal?: AbortSignal) {
      waiting();
      return new Promise<boolean>((resolve) => {
        signal?.addEventListener('abort', () => resolve(false), { once: true });
      });
    },
  };
  return { feed: feed as unknown as EventFeed, cursors, waited };
}

describe('an event stream and its cursor in the feed', () => {
  it('moves the cursor past what it sent, and closes it when its client goes', async () => {
    const { feed, cursors, waited } = twoEvents();
    const gone = new AbortController();
    let released = 0;
    const stream = eventStream(
      feed,
      0n,
      () => (released += 1),
      quietLog,
      gone.signal,
      async () => true,
    );
    const chunks: string[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk.toString()));
    await waited;
    assert.equal(cursors.length, 1);
    assert.equal(cursors[0]!.position, 2n, 'past both events sent');
    assert.match(chunks.join(''), /id: 2\nevent: plant.created/);
    assert.equal(cursors[0]!.closed, false, 'open while the stream waits');
    gone.abort();
    stream.destroy();
    await once(stream, 'close');
    // The wait ends at the abort; the generator's finally runs on its next turn.
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(cursors[0]!.closed, true, 'closed once the stream ended');
    assert.ok(released > 0, "its slot released (admit's release is idempotent)");
  });
});
