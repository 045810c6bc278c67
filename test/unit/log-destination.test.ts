import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { type LineSink, TurnBatchedDestination } from '../../src/server/log-destination.js';

// The server's log destination: the lines of one turn of the event loop in one write.

function sink(): LineSink & { writes: string[]; flushes: number } {
  const out = {
    writes: [] as string[],
    flushes: 0,
    write(text: string) {
      out.writes.push(text);
    },
    flushSync() {
      out.flushes += 1;
    },
  };
  return out;
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

test('the lines of one turn reach the sink in one write, in order, at the end of the turn', async () => {
  const out = sink();
  const destination = new TurnBatchedDestination(out);
  destination.write('a\n');
  destination.write('b\n');
  destination.write('c\n');
  assert.deepEqual(out.writes, [], 'nothing is written during the turn');
  await nextTurn();
  assert.deepEqual(out.writes, ['a\nb\nc\n']);
  destination.write('d\n');
  await nextTurn();
  assert.deepEqual(out.writes, ['a\nb\nc\n', 'd\n'], 'a later turn writes its own lines');
  await nextTurn();
  assert.equal(out.writes.length, 2, 'a turn without lines writes nothing');
});

test('flushSync writes the lines waiting now, and has the sink write out what it holds', async () => {
  const out = sink();
  const destination = new TurnBatchedDestination(out);
  destination.write('a\n');
  destination.flushSync();
  assert.deepEqual(out.writes, ['a\n']);
  assert.equal(out.flushes, 1);
  await nextTurn();
  assert.deepEqual(out.writes, ['a\n'], 'nothing is written twice');
});

test("pino's flush(callback) writes the waiting lines before calling back", async () => {
  const out = sink();
  const logger = pino({ base: null, timestamp: false }, new TurnBatchedDestination(out));
  logger.info({ n: 1 }, 'one');
  await new Promise<void>((resolve, reject) =>
    logger.flush((error) => (error ? reject(error) : resolve())),
  );
  assert.deepEqual(out.writes, ['{"level":30,"n":1,"msg":"one"}\n']);
});

test('a failing sink is reported to the flush callback, not thrown', () => {
  const destination = new TurnBatchedDestination({
    write() {
      throw new Error('disk gone');
    },
    flushSync() {},
  });
  destination.write('a\n');
  let reported: Error | undefined;
  destination.flush((error) => {
    reported = error;
  });
  assert.equal(reported?.message, 'disk gone');
});
