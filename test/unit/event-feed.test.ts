import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ChangeEvent } from '../../src/core/change-events.js';
import { EventFeed } from '../../src/service/event-feed.js';
import { RECENT_EVENTS } from '../../src/service/recent-events.js';
import type { EventLog, EventPage, HandedEvents } from '../../src/store/store.js';
import { changeEvent } from '../helpers/change-events.js';

// The feed against a log in memory: which appends it takes from the store's hand and which
// send it to the log, counted by the log's reads. Nothing waits for a timer to run out: a
// wake-up put off by LOOK_EVERY_MS is awaited as the promise it resolves.

class MemoryLog implements EventLog {
  readonly entries: ChangeEvent[] = [];
  reads = 0;
  readonly listeners = new Set<(handed?: HandedEvents) => void>();

  async read(after: bigint | undefined, limit: number): Promise<EventPage> {
    this.reads += 1;
    const from = after ?? 0n;
    return { events: this.entries.filter((e) => e.position > from).slice(0, limit), horizon: 0n };
  }

  async head(): Promise<bigint> {
    return this.entries.at(-1)?.position ?? 0n;
  }

  async prune(): Promise<number> {
    return 0;
  }

  onAppended(listener: (handed?: HandedEvents) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Commits `positions`; this process's commit hands them over, another's does not. */
  commit(positions: bigint[], { here }: { here: boolean }): void {
    const events = positions.map(changeEvent);
    this.entries.push(...events);
    this.entries.sort((a, b) => (a.position < b.position ? -1 : 1));
    for (const listener of this.listeners) listener(here ? () => events : undefined);
  }
}

/** A feed whose log holds `initial` events, started, with one stream open at the head. */
async function following(initial = 0n) {
  const log = new MemoryLog();
  for (let p = 1n; p <= initial; p++) log.commit([p], { here: false });
  const feed = new EventFeed(log);
  const release = feed.admit(1, () => assert.fail('no other token takes its slot'));
  const cursor = feed.follow(initial);
  assert.deepEqual(await feed.after(initial, 10), []);
  return { log, feed, release, cursor, readsBefore: log.reads };
}

/** Resolves after the current turn of the event loop: its promise callbacks have run. */
const aTurn = () => new Promise((resolve) => setImmediate(resolve));

const listenersOf = (log: MemoryLog) => [...log.listeners];

const positions = (events: ChangeEvent[]) => events.map((e) => e.position);

describe('the changes feed and the events the store hands over', () => {
  it("takes this process's events that follow what it holds without reading the log", async () => {
    const { log, feed, readsBefore } = await following(3n);
    const woken = feed.waitBeyond(3n, 60_000);
    log.commit([4n], { here: true });
    log.commit([5n, 6n], { here: true });
    assert.equal(await woken, true);
    assert.deepEqual(positions(await feed.after(3n, 10)), [4n, 5n, 6n]);
    assert.equal(log.reads, readsBefore, 'no read of the log');
    feed.close();
  });

  it('reads the log when another process committed in between', async () => {
    const { log, feed, readsBefore } = await following(3n);
    const woken = feed.waitBeyond(3n, 60_000);
    // Position 4 is another process's: its data_version poll has not fired yet.
    log.entries.push(changeEvent(4n));
    log.commit([5n], { here: true });
    assert.equal(await woken, true);
    assert.deepEqual(positions(await feed.after(3n, 10)), [4n, 5n]);
    assert.ok(log.reads > readsBefore, 'the log was read');
    feed.close();
  });

  it('ignores handed events it already read from the log', async () => {
    const { log, feed } = await following(0n);
    // Read from the log before this process's listener call came (a poll got there first).
    log.entries.push(changeEvent(1n));
    const woken = feed.waitBeyond(0n, 60_000);
    log.commit([2n], { here: false });
    assert.equal(await woken, true);
    assert.deepEqual(positions(await feed.after(0n, 10)), [1n, 2n]);
    const reads = log.reads;
    const late = (position: bigint) => () => [changeEvent(position)];
    // The late call for 1, then this process's next commit: 1 is not appended twice.
    for (const listener of listenersOf(log)) listener(late(1n));
    const next = feed.waitBeyond(2n, 60_000);
    await aTurn();
    log.commit([3n], { here: true });
    assert.equal(await next, true);
    assert.deepEqual(positions(await feed.after(0n, 10)), [1n, 2n, 3n]);
    assert.equal(log.reads, reads, 'taken from the hand');
    feed.close();
  });

  it('a look under way reads what commits before it reads, and takes no second look for it', async () => {
    const { log, feed, readsBefore } = await following(0n);
    const woken = feed.waitBeyond(0n, 60_000);
    await aTurn(); // waiting
    log.commit([1n], { here: false }); // another process's: a look starts
    log.commit([2n], { here: true }); // this process's, before the look has read
    assert.equal(await woken, true);
    await aTurn(); // the look has ended
    const next = feed.waitBeyond(2n, 60_000);
    await aTurn();
    log.commit([3n], { here: true });
    assert.equal(await next, true);
    assert.deepEqual(positions(await feed.after(0n, 10)), [1n, 2n, 3n]);
    assert.equal(log.reads, readsBefore + 1, 'one look, then 3 from the hand');
    feed.close();
  });

  it('with no stream or wait open, takes nothing handed and reads at the next wait', async () => {
    const { log, feed, release } = await following(0n);
    release();
    log.commit([1n], { here: true });
    log.commit([2n], { here: true });
    const reads = log.reads;
    assert.deepEqual(positions(await feed.after(0n, 10)), [1n, 2n]);
    assert.equal(log.reads, reads + 1, 'one read, at the next use');
    feed.close();
  });

  it('answers from memory only once started, and not while it has missed appends', async () => {
    const fresh = new EventFeed(new MemoryLog());
    assert.equal(fresh.inMemory(0n), false, 'not started: nothing held');
    const { log, feed, release } = await following(0n);
    assert.equal(feed.inMemory(0n), true);
    release();
    log.commit([1n], { here: true });
    // Heard with nobody open: the next read looks at the log first, and may drop position 0.
    assert.equal(feed.inMemory(0n), false);
    assert.deepEqual(positions(await feed.after(0n, 10)), [1n]);
    assert.equal(feed.inMemory(1n), true);
    feed.close();
  });

  it('keeps between RECENT_EVENTS and twice as many, and pages older ones from the log', async () => {
    const { log, feed, readsBefore } = await following(0n);
    const total = BigInt(3 * RECENT_EVENTS);
    for (let p = 1n; p <= total; p++) log.commit([p], { here: true });
    assert.equal(log.reads, readsBefore);
    const newest = await feed.after(total - 10n, 100);
    assert.deepEqual(
      positions(newest),
      [...Array(10).keys()].map((i) => total - 9n + BigInt(i)),
    );
    assert.equal(log.reads, readsBefore, 'the newest come from memory');
    const oldest = await feed.after(0n, 5);
    assert.deepEqual(positions(oldest), [1n, 2n, 3n, 4n, 5n]);
    assert.equal(log.reads, readsBefore + 1, 'older than memory: a page of the log');
    feed.close();
  });

  it('pages a stream behind memory from the log without a look; a page of the API looks', async () => {
    const log = new MemoryLog();
    let looks = 0;
    const feed = new EventFeed(log, {
      settle: async () => {
        looks += 1;
      },
    });
    const release = feed.admit(1, () => assert.fail('no other token takes its slot'));
    feed.follow(0n);
    assert.deepEqual(await feed.after(0n, 10), []);
    const total = BigInt(3 * RECENT_EVENTS);
    for (let p = 1n; p <= total; p++) log.commit([p], { here: true });
    const [looksBefore, readsBefore] = [looks, log.reads];
    assert.deepEqual(positions(await feed.after(0n, 3)), [1n, 2n, 3n]);
    assert.equal(log.reads, readsBefore + 1, 'older than memory: a page of the log');
    assert.equal(looks, looksBefore, 'and no look: memory shows the log has them');
    assert.deepEqual(positions((await feed.page(0n, 3)).events), [1n, 2n, 3n]);
    assert.equal(looks, looksBefore + 1, 'a page asked for makes every commit readable first');
    release();
    feed.close();
  });

  it('drops from memory, at the next wake-up, the events every stream has read', async () => {
    const { log, feed, cursor, readsBefore } = await following(0n);
    const behind = feed.follow(0n);
    const woken = feed.waitBeyond(0n, 60_000);
    log.commit([1n, 2n, 3n], { here: true });
    assert.equal(await woken, true);
    assert.deepEqual(positions(await feed.after(0n, 10)), [1n, 2n, 3n]);
    // One stream has read them all, the other only the first.
    cursor.position = 3n;
    behind.position = 1n;
    const next = feed.waitBeyond(3n, 60_000);
    await aTurn(); // waiting: the wake-up, not the wait's own look, answers it
    log.commit([4n], { here: true });
    assert.equal(await next, true);
    assert.deepEqual(positions(await feed.after(1n, 10)), [2n, 3n, 4n]);
    assert.equal(log.reads, readsBefore, 'what the slower stream has yet to read is in memory');
    // The slower stream ends: at the wake-up after, what the other has read is dropped.
    behind.close();
    const last = feed.waitBeyond(4n, 60_000);
    await aTurn();
    log.commit([5n], { here: true });
    assert.equal(await last, true);
    assert.deepEqual(positions(await feed.after(3n, 10)), [4n, 5n]);
    assert.equal(log.reads, readsBefore, 'above the stream still open: memory');
    assert.deepEqual(positions(await feed.after(1n, 10)), [2n, 3n, 4n, 5n]);
    assert.equal(log.reads, readsBefore + 1, 'read by every stream: from the log');
    feed.close();
  });

  it('a stream behind what memory holds pins nothing: it reads the log anyway', async () => {
    const { log, feed, cursor, readsBefore } = await following(0n);
    const woken = feed.waitBeyond(0n, 60_000);
    await aTurn();
    log.commit([1n, 2n, 3n], { here: true });
    assert.equal(await woken, true);
    cursor.position = 3n;
    const next = feed.waitBeyond(3n, 60_000);
    await aTurn();
    log.commit([4n], { here: true });
    assert.equal(await next, true); // 1 to 3 dropped: every stream had them
    // A stream resuming from 1, below what is held, and the first stream up to date.
    const behind = feed.follow(1n);
    cursor.position = 4n;
    const last = feed.waitBeyond(4n, 60_000);
    await aTurn();
    log.commit([5n], { here: true });
    assert.equal(await last, true);
    assert.deepEqual(positions(await feed.after(4n, 10)), [5n]);
    assert.equal(log.reads, readsBefore, 'what the stream up to date reads is in memory');
    assert.deepEqual(positions(await feed.after(3n, 10)), [4n, 5n]);
    assert.equal(log.reads, readsBefore + 1, '4 was dropped though the stream behind lacks it');
    behind.close();
    feed.close();
  });
});
