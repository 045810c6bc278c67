import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLog } from '../../src/core/log.js';
import { postgresEventLog } from '../../src/store/postgres/plant-events.js';
import type { Query } from '../../src/store/postgres/query.js';
import { MessageSignal } from '../../src/store/webhook-rows.js';

// The watermark's looks (src/store/postgres/plant-events.ts) with a database that fails one
// look: the calls that waited for the look after it, and every call after that, get answers
// of their own, not that failure (a pool wait that timed out once under load left GET /events
// failing for a third of its callers for the rest of the process's life).

interface Look {
  answer(last: bigint): void;
  fail(error: Error): void;
}

function fakeDatabase() {
  const looks: Look[] = [];
  const started: Array<() => void> = [];
  const query = ((name: string) =>
    new Promise((resolve, reject) => {
      assert.equal(name, 'events.look');
      looks.push({
        answer: (last) => resolve({ rows: [{ last, writers: [] }] }),
        fail: reject,
      });
      started.shift()?.();
    })) as unknown as Query;
  /** Resolves with the look asked for the `n`-th time (from 1), once it is asked. */
  const look = (n: number): Promise<Look> =>
    looks.length >= n
      ? Promise.resolve(looks[n - 1]!)
      : new Promise((resolve) => started.push(() => void look(n).then(resolve)));
  return { query, look };
}

test('a failed look fails only its own callers: those waiting for the next get its answer', async () => {
  const db = fakeDatabase();
  const log = postgresEventLog(
    db.query,
    new MessageSignal(silentLog),
    new MessageSignal(silentLog),
    () => {},
    silentLog,
  );
  const first = log.settle!();
  const waiting = log.settle!();
  (await db.look(1)).fail(new Error('timeout exceeded when trying to connect'));
  await assert.rejects(first, /timeout exceeded/);
  (await db.look(2)).answer(5n);
  await waiting;

  // A look runs; calls during it share the next, which answers them all.
  const during = [log.settle!(), log.settle!(), log.settle!()];
  (await db.look(3)).answer(6n);
  (await db.look(4)).answer(7n);
  await Promise.all(during);
  const read = log.readable();
  (await db.look(5)).answer(8n);
  assert.equal((await read).position, 8n);
});
