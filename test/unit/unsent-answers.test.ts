import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { test } from 'node:test';
import {
  overBudget,
  type Sending,
  stalledAnswers,
  stillStalled,
  unsentBytes,
} from '../../src/http/unsent-answers.js';

// What connections hold unsent, and which of them a sweep closes: by the send timeout, or
// because all together hold more than their bound. Sockets and answers here are the few
// fields the sweep reads.

const socket = (bytesWritten: number, writableLength: number) =>
  ({ bytesWritten, writableLength }) as Socket;
const answer = (attached: boolean, writableLength: number) =>
  ({ socket: attached ? {} : null, writableLength }) as ServerResponse;

function connection(
  name: string,
  sent: number,
  unsent: number,
  queued = 0,
): Sending & { name: string } {
  return {
    name,
    socket: socket(sent + unsent, unsent),
    answers: new Set(queued > 0 ? [answer(true, unsent), answer(false, queued)] : []),
    flushed: sent,
    flushedSince: 0,
    queued: 0,
    wasSending: unsent > 0,
  };
}

test('what a connection holds unsent: its socket, and the answers queued behind without one', () => {
  assert.equal(unsentBytes(socket(100, 40), []), 40);
  // The answer being sent counts through its socket; one queued behind holds its own.
  assert.equal(unsentBytes(socket(100, 40), [answer(true, 40), answer(false, 500)]), 540);
});

test('within the bound nothing is closed; past it the largest stalled go first, until within', () => {
  const stalled = [
    { connection: 'a', unsent: 10 },
    { connection: 'b', unsent: 50 },
    { connection: 'c', unsent: 30 },
  ];
  assert.deepEqual(overBudget(stalled, 90, 100), []);
  assert.deepEqual(overBudget(stalled, 130, 100), ['b']);
  assert.deepEqual(overBudget(stalled, 170, 100), ['b', 'c']);
  // Not enough stalled to get within: every stalled one goes, the others stay.
  assert.deepEqual(overBudget(stalled, 500, 100), ['b', 'c', 'a']);
});

test('a sweep: the send timeout, then the bound among those that took nothing since the last', () => {
  const big = 40 * 1024 * 1024;
  // Its client took 1,000 bytes since the last sweep.
  const moving = { ...connection('moving', 0, big), socket: socket(1_000 + big, big) };
  const timedOut = connection('timed out', 5, 10);
  timedOut.flushedSince = -60_000;
  const stalledBig = connection('stalled, large', 7, big, big);
  const stalledSmall = connection('stalled, small', 3, 1_000);
  const idle = connection('idle', 9, 0);
  const swept = stalledAnswers([moving, timedOut, stalledBig, stalledSmall, idle], 1_000, 30_000);
  assert.deepEqual(
    swept.timedOut.map((c) => c.name),
    ['timed out'],
  );
  // 40 MB moving + 80 MB stalled: past 64 MB in all, and the large stalled one gets it within.
  assert.deepEqual(
    swept.overBound.map((c) => c.name),
    ['stalled, large'],
  );
  assert.equal(moving.flushed, 1_000, 'progress recorded for the next sweep');
  assert.equal(moving.flushedSince, 1_000);
});

test('a sweep sees progress inside one large write: the write queue of libuv shrinks', () => {
  // One write of 10 MB under way: Node counts all of it as waiting until it has gone, so
  // written minus waiting stays put; libuv's queue shows the kernel taking part of it.
  const writing = (queue: number) =>
    ({
      bytesWritten: 10e6,
      writableLength: 10e6,
      _handle: { writeQueueSize: queue },
    }) as unknown as Socket;
  const c = { ...connection('one write', 0, 0), socket: writing(9e6) };
  assert.deepEqual(stalledAnswers([c], 0, 30_000).timedOut, []);
  c.socket = writing(8e6);
  assert.deepEqual(stalledAnswers([c], 29_000, 30_000).timedOut, [], 'the queue shrank: moving');
  // It stops shrinking: stalled from the last look that saw it move.
  assert.deepEqual(stalledAnswers([c], 50_000, 30_000).timedOut, []);
  assert.deepEqual(stalledAnswers([c], 59_000, 30_000).timedOut.length, 1);
});

test('an answer begun since the last sweep has not stalled; one that took nothing since has', () => {
  // Idle at the last sweep, then one large write: Node counts none of it written until all
  // has gone, and libuv's queue was empty before, so neither count shows progress.
  const idle = { bytesWritten: 500, writableLength: 0 } as Socket;
  const c = { ...connection('one write', 500, 0), socket: idle, flushedSince: -10_000 };
  assert.deepEqual(stalledAnswers([c], 0, 30_000).stalled, []);
  const writing = {
    bytesWritten: 500 + 10e6,
    writableLength: 10e6,
    _handle: { writeQueueSize: 9e6 },
  };
  c.socket = writing as unknown as Socket;
  const begun = stalledAnswers([c], 1_000, 30_000);
  assert.deepEqual(begun.stalled, [], 'begun since the last look: not stalled');
  assert.equal(c.flushedSince, 1_000, 'its stall, if any, counts from here');
  assert.deepEqual(stalledAnswers([c], 2_000, 30_000).stalled, [c], 'took nothing since');
  assert.deepEqual([...stillStalled([c], 1)], [c.socket], 'and still takes nothing');
  assert.deepEqual([...stillStalled([c], 0)], [], 'none looked at');
  writing._handle.writeQueueSize = 8e6;
  assert.deepEqual([...stillStalled([c], 1)], [], 'the kernel took some since the sweep');
});

test('past the bound, answers begun since the last sweep are cut after the stalled ones', () => {
  const big = 40 * 1024 * 1024;
  // Both idle at the last sweep; one large write each since, nothing taken of it.
  const begun = (name: string, size: number) => ({
    ...connection(name, 500, 0),
    socket: {
      bytesWritten: 500 + size,
      writableLength: size,
      _handle: { writeQueueSize: size },
    } as unknown as Socket,
  });
  const stalled = connection('stalled', 7, big);
  const swept = stalledAnswers(
    [begun('begun, small', 1_000), stalled, begun('begun', big)],
    0,
    30_000,
  );
  assert.deepEqual(
    swept.overBound.map((c) => c.name),
    ['stalled'],
    'the stalled one first',
  );
  assert.deepEqual(
    swept.stalled.map((c) => c.name),
    ['stalled'],
    'only it makes room',
  );
  const alone = stalledAnswers([begun('a', big), begun('b', 2 * big)], 0, 30_000);
  assert.deepEqual(
    alone.overBound.map((c) => c.name),
    ['b'],
    'then the largest begun',
  );
});

test('those closed since the sweep leave the front of the stalled, so more make room', () => {
  const stalledOne = (destroyed: boolean) => ({
    ...connection('stalled', 7, 1_000),
    socket: { bytesWritten: 1_007, writableLength: 1_000, destroyed } as unknown as Socket,
  });
  const list = [...Array.from({ length: 40 }, () => stalledOne(true)), stalledOne(false)];
  const last = list.at(-1)!.socket;
  assert.deepEqual([...stillStalled(list, 32)], [last], 'found past 40 closed ones');
  assert.equal(list.length, 1, 'the closed ones dropped');
});
