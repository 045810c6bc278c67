import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { it, type TestContext } from 'node:test';
import type { Log } from '../../src/core/log.js';
import { WebhookFanOut } from '../../src/service/webhook-fanout.js';
import type { FanOutStep, FanOutWake, WebhookEvents } from '../../src/store/store.js';

// The fan-out loop against events in memory: what wakes it, how it goes on through a
// backlog and at what pace, what it does with a failure, and how it stops. The clock that
// times the batches is the test's; nothing waits for a timer to run out.

const NONE: FanOutStep = { endpoints: 0, messages: 0, room: true };
const ONE: FanOutStep = { endpoints: 1, messages: 3, room: true };
/** Nothing to do, and no endpoint with room for a message. */
const FULL: FanOutStep = { endpoints: 0, messages: 0, room: false };

/** Answers the steps given, in order (a step that is an Error is thrown), then NONE. */
class MemoryEvents extends EventEmitter implements WebhookEvents {
  readonly calls: number[] = [];
  /** Calls whose answer the loop has had (a turn of the event loop after each). */
  private answered = 0;
  private readonly subscribers = new Set<(why: FanOutWake) => void>();

  constructor(
    private readonly steps: (FanOutStep | Error)[],
    private readonly clock: { ms: number },
    private readonly msPerStep = 0,
    /** Whether other work uses the database; absent, as on SQLite: every batch counts. */
    readonly othersBusy?: () => boolean,
  ) {
    super();
  }

  async fanOut(maxMessages: number): Promise<FanOutStep> {
    this.calls.push(maxMessages);
    this.clock.ms += this.msPerStep;
    const step = this.steps.shift() ?? NONE;
    setImmediate(() => {
      this.answered += 1;
      this.emit('answered');
    });
    if (step instanceof Error) throw step;
    return step;
  }

  onEvents(listener: (why: FanOutWake) => void): () => void {
    this.subscribers.add(listener);
    return () => this.subscribers.delete(listener);
  }

  /** A write of this process committed ('events'), or a message ended ('room'). */
  recorded(why: FanOutWake = 'events'): void {
    for (const listener of this.subscribers) listener(why);
  }

  /** Resolves once the loop has had the answers of `n` calls of fanOut in all. */
  async called(n: number): Promise<void> {
    while (this.answered < n) await once(this, 'answered');
  }
}

function start(t: TestContext, events: MemoryEvents, clock: { ms: number }, share = 0.1) {
  const errors: string[] = [];
  const log: Log = {
    error: (_fields, message) => errors.push(message),
    warn: () => undefined,
    info: () => undefined,
  };
  // A poll that never comes within a test: only wake-ups and backlogs make it fan out.
  const fanOut = new WebhookFanOut({ events, log, pollMs: 3_600_000, share, now: () => clock.ms });
  fanOut.start();
  t.after(() => fanOut.stop());
  return { fanOut, errors };
}

/**
 * The fan-out's pauses (rounded to the ms), each passed at once with the test's clock moved on
 * as long; other timers run as they are.
 */
function passedPauses(t: TestContext, clock: { ms: number }): number[] {
  const pauses: number[] = [];
  const setTimeoutReal = globalThis.setTimeout;
  t.mock.method(globalThis, 'setTimeout', (callback: () => void, ms: number) => {
    if (callback.name !== 'fanOutResume') return setTimeoutReal(callback, ms);
    pauses.push(Math.round(ms));
    clock.ms += ms;
    return setTimeoutReal(callback, 0);
  });
  return pauses;
}

/**
 * The pauses the fan-out takes through `steps`, each batch taking `msPerStep` of a test
 * clock; `othersBusy` is told how many batches have begun.
 */
async function pausesThrough(
  t: TestContext,
  steps: FanOutStep[],
  msPerStep: number,
  othersBusy?: (calls: number) => boolean,
): Promise<number[]> {
  const clock = { ms: 0 };
  const batches = steps.length;
  const events: MemoryEvents = new MemoryEvents(
    [...steps],
    clock,
    msPerStep,
    othersBusy && (() => othersBusy(events.calls.length)),
  );
  const pauses = passedPauses(t, clock);
  start(t, events, clock);
  await events.called(batches);
  return pauses;
}

it('looks once at the start, then fans out at each event recorded, at most 1,000 messages a time', async (t) => {
  const clock = { ms: 0 };
  const events = new MemoryEvents([NONE, NONE], clock);
  start(t, events, clock);
  await events.called(1);
  events.recorded();
  await events.called(2);
  assert.deepEqual(events.calls, [1000, 1000]);
});

it('while no endpoint has room, writes do not wake it; a message that ends does', async (t) => {
  const clock = { ms: 0 };
  const events = new MemoryEvents([FULL, FULL, NONE, NONE], clock);
  start(t, events, clock);
  await events.called(1);
  for (let i = 0; i < 5; i++) events.recorded('events');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(events.calls.length, 1, 'no fan-out for the writes');
  events.recorded('room');
  await events.called(2);
  events.recorded('events');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(events.calls.length, 2, 'still no endpoint with room: no fan-out for the write');
  events.recorded('room');
  await events.called(3);
  events.recorded('events');
  await events.called(4);
});

it('goes on through a backlog, pausing so that it takes a tenth of the time at most', async (t) => {
  // Each batch takes 100 ms of the test's clock; a pause moves the clock on as long.
  assert.deepEqual(
    await pausesThrough(t, [ONE, ONE, ONE, ONE, ONE, ONE, NONE], 100),
    [700, 900, 900, 3_600_000],
    'the first three batches spend the 300 ms a burst may take (and the 30 refilled meanwhile); ' +
      'each after them waits 9 times its time; then, nothing left, it waits for a wake-up or ' +
      'the poll',
  );
});

it('counts only the batches during which other work used the database, where the store tells', async (t) => {
  // Batches of 150 ms, half a burst's 300. Other work from the end of the third on (the
  // store is asked as each batch begins and ends).
  const steps = [ONE, ONE, ONE, ONE, ONE, ONE, ONE, NONE];
  assert.deepEqual(
    await pausesThrough(t, steps, 150, (calls) => calls >= 3),
    [1200, 1350, 1350, 3_600_000],
    'the first two batches, nothing else using the database, spend nothing; the third and ' +
      'fourth spend the full burst of 300 ms and the 30 refilled, the fifth overspends it by ' +
      '120 ms and waits 10 times that, each after it 10 times 135 (0 + 15 - 150); then, ' +
      'nothing left, it waits for a wake-up or the poll',
  );
});

it('does not count the time a batch waited for others', async (t) => {
  // Batches of 300 ms, 100 of them waiting (for writes still committing, or the writer).
  const waited = { ...ONE, waitedMs: 100 };
  assert.deepEqual(
    await pausesThrough(t, [waited, waited, waited, NONE], 300),
    [700, 1700, 3_600_000],
    'each batch spends its 200 ms of work and the 30 refilled during it: the first from the ' +
      'full burst, the second overspends it by 70 ms, the third by 170; counted whole, the ' +
      'second would have waited 2.7 s; not at all, none',
  );
});

it('fans out single writes far apart at once, without a pause', async (t) => {
  const clock = { ms: 0 };
  const events = new MemoryEvents([NONE, ONE, ONE, NONE], clock, 5);
  const pauses: number[] = [];
  const setTimeoutReal = globalThis.setTimeout;
  t.mock.method(globalThis, 'setTimeout', (callback: () => void, ms: number) => {
    if (callback.name === 'fanOutResume') pauses.push(ms);
    return setTimeoutReal(callback, ms);
  });
  start(t, events, clock);
  await events.called(1);
  clock.ms += 1000;
  events.recorded();
  await events.called(4);
  assert.deepEqual(pauses, [3_600_000, 3_600_000], 'only the waits for a wake-up');
});

it('a wake-up does not cut a pause short: a flood of writes cannot take its share away', async (t) => {
  const clock = { ms: 0 };
  // A batch of 1 s at a share of 1/1000 (a burst of 1 ms): a pause of about 1000 s, which the
  // test never waits out.
  const events = new MemoryEvents([ONE], clock, 1000);
  const { fanOut } = start(t, events, clock, 0.001);
  await events.called(1);
  for (let i = 0; i < 5; i++) events.recorded();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(events.calls.length, 1, 'still pausing');
  await fanOut.stop();
  assert.equal(events.calls.length, 1, 'stopped in its pause, without another batch');
});

it('logs a failure, keeps going, and fans out again at the next wake-up', async (t) => {
  const clock = { ms: 0 };
  const events = new MemoryEvents([new Error('connection refused'), ONE, NONE], clock);
  const { errors } = start(t, events, clock);
  await events.called(1);
  assert.deepEqual(errors, [
    'fanning out webhook events failed; they are kept, and fanned out later',
  ]);
  events.recorded();
  await events.called(3);
});

it('stops at once when idle, and hears no more wake-ups', async (t) => {
  const clock = { ms: 0 };
  const events = new MemoryEvents([], clock);
  const { fanOut } = start(t, events, clock);
  await events.called(1);
  await fanOut.stop();
  events.recorded();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(events.calls.length, 1);
});
