import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { TurnGate } from '../../src/http/routes/turn-gate.js';

// A turn of the event loop lets `perTurn` callers through, and the others go at the turns
// after (setImmediate: after each turn's I/O), in the order they came.

const settled = () => new Promise<void>((resolve) => queueMicrotask(resolve));

test('a turn lets perTurn callers through, the rest one turn after another, in order', async () => {
  const gate = new TurnGate(2);
  const order: number[] = [];
  const passes = [1, 2, 3, 4, 5].map((n) => gate.pass().then(() => order.push(n)));
  await settled();
  assert.deepEqual(order, [1, 2]);
  assert.equal(gate.queued, 3);
  await nextTurn();
  await settled();
  assert.deepEqual(order, [1, 2, 3, 4]);
  await nextTurn();
  await Promise.all(passes);
  assert.deepEqual(order, [1, 2, 3, 4, 5]);
});

test('the count starts anew each turn, and a newcomer queues behind those waiting', async () => {
  const gate = new TurnGate(1);
  await gate.pass();
  const late = gate.pass();
  let passed = false;
  void late.then(() => (passed = true));
  await settled();
  assert.equal(passed, false, 'the turn had let one through');
  await nextTurn();
  await settled();
  assert.equal(passed, true);
  // A later turn with nobody waiting: one at once again.
  await nextTurn();
  await nextTurn();
  let now = false;
  void gate.pass().then(() => (now = true));
  await settled();
  assert.equal(now, true);
});

test('a caller whose signal aborts leaves its place at once, and takes no pass', async () => {
  const gate = new TurnGate(1);
  await gate.pass();
  const stop = new AbortController();
  const order: string[] = [];
  const leaving = gate.pass(stop.signal).then(() => order.push('left'));
  const next = gate.pass().then(() => order.push('next'));
  assert.equal(gate.queued, 2);
  stop.abort();
  await leaving;
  assert.equal(gate.queued, 1, 'its place is given up');
  assert.deepEqual(order, ['left']);
  await nextTurn();
  await next;
  assert.deepEqual(order, ['left', 'next'], 'the one behind passes at the next turn');
  // Aborted already: at once, and the turn's count is untouched.
  await gate.pass(stop.signal);
  assert.equal(gate.queued, 0);
});

test('callers with the key of one let through this turn go with it, taking no pass', async () => {
  const gate = new TurnGate<string>(1, 10);
  const order: string[] = [];
  const passes = [
    gate.pass(undefined, 'a').then(() => order.push('a1')),
    gate.pass(undefined, 'a').then(() => order.push('a2')),
    gate.pass(undefined, 'b').then(() => order.push('b1')),
    gate.pass().then(() => order.push('none')),
    gate.pass(undefined, 'b').then(() => order.push('b2')),
    gate.pass(undefined, 'c').then(() => order.push('c1')),
  ];
  await settled();
  assert.deepEqual(order, ['a1', 'a2'], 'the second "a" shares the turn\'s one pass');
  await nextTurn();
  await settled();
  // The turn's pass goes to "b", and every "b" waiting goes with it, in the order they came.
  assert.deepEqual(order, ['a1', 'a2', 'b1', 'b2']);
  // A "b" coming later in the same turn goes at once too.
  await gate.pass(undefined, 'b');
  assert.equal(gate.queued, 2);
  await nextTurn();
  await settled();
  assert.deepEqual(order, ['a1', 'a2', 'b1', 'b2', 'none']);
  await nextTurn();
  await Promise.all(passes);
  assert.deepEqual(order, ['a1', 'a2', 'b1', 'b2', 'none', 'c1']);
});

test('the callers a turn lets through go one key after another, in the order keys passed', async () => {
  const gate = new TurnGate<string>(2, 10);
  await gate.pass(undefined, 'x');
  await gate.pass(undefined, 'y');
  const order: string[] = [];
  const passes = ['a1', 'b1', 'a2', 'b2', 'a3'].map((name) =>
    gate.pass(undefined, name[0]).then(() => order.push(name)),
  );
  await nextTurn();
  await Promise.all(passes);
  // Stable within a key: a batch's text, kept for the next stream, is made once a key.
  assert.deepEqual(order, ['a1', 'a2', 'a3', 'b1', 'b2']);
});

test('a turn lets sharedPerTurn callers go with a key let through, the rest at the next', async () => {
  const gate = new TurnGate<string>(1, 2);
  const order: string[] = [];
  const passes = ['a1', 'a2', 'a3', 'a4', 'a5', 'a6'].map((name) =>
    gate.pass(undefined, 'a').then(() => order.push(name)),
  );
  await settled();
  assert.deepEqual(order, ['a1', 'a2', 'a3'], 'one pass, two sharing it');
  assert.equal(gate.queued, 3);
  await nextTurn();
  await Promise.all(passes);
  assert.deepEqual(order, ['a1', 'a2', 'a3', 'a4', 'a5', 'a6']);
  // Without sharing (the default), a key is only a caller like any other.
  const plain = new TurnGate<string>(1);
  await plain.pass(undefined, 'a');
  let second = false;
  void plain.pass(undefined, 'a').then(() => (second = true));
  await settled();
  assert.equal(second, false);
});

test('a keyed caller whose signal aborts leaves the queue, and the others of its key go', async () => {
  const gate = new TurnGate<string>(1, 10);
  await gate.pass();
  const stop = new AbortController();
  const order: string[] = [];
  const leaving = gate.pass(stop.signal, 'a').then(() => order.push('left'));
  const others = [gate.pass(undefined, 'a'), gate.pass(undefined, 'a')].map((p, i) =>
    p.then(() => order.push(`a${i}`)),
  );
  stop.abort();
  await leaving;
  assert.equal(gate.queued, 2);
  await nextTurn();
  await Promise.all(others);
  assert.deepEqual(order, ['left', 'a0', 'a1']);
});
