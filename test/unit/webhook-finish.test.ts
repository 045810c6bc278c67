import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { silentLog } from '../../src/core/log.js';
import { StoreUnavailableError } from '../../src/core/unavailable.js';
import type { Query } from '../../src/store/postgres/query.js';
import { finishInBatches } from '../../src/store/postgres/webhook-finish.js';
import { MessageSignal } from '../../src/store/webhook-rows.js';

// What a failed batch of attempt records does, against a database that fails as the test
// says: the batch statements it is sent, counted.
function recorder(fail: (batchSize: number, call: number) => Error | undefined) {
  const sizes: number[] = [];
  const query = (async (_name: string, _text: string, values: unknown[]) => {
    const ids = values[0] as string[];
    sizes.push(ids.length);
    const error = fail(ids.length, sizes.length);
    if (error !== undefined) throw error;
    // Every attempt recorded: a row per attempt, its endpoint neither failing nor refilled.
    const rows = ids.map((id, i) => ({
      id: BigInt(id),
      n: i + 1,
      endpoint_id: 1n,
      kind: 'delivered',
      at: new Date(0),
      pending_before: 0,
      was_failing: false,
    }));
    return { rows };
  }) as unknown as Query;
  const finish = finishInBatches(query, new MessageSignal(silentLog), () => undefined, silentLog);
  const attempt = {
    at: new Date(0),
    durationMs: 1,
    httpStatus: 204,
    error: null,
    responseExcerpt: '',
  };
  const three = () =>
    Promise.allSettled(
      [1n, 2n, 3n].map((id) => finish(id, new Date(1), attempt, { kind: 'delivered' })),
    );
  return { sizes, three };
}

/** What a Query throws for a statement rolled back for another's sake (`code`). */
function raced(code: string): StoreUnavailableError {
  const error = new pg.DatabaseError('deadlock detected', 0, 'error');
  error.code = code;
  return new StoreUnavailableError(error);
}

describe('attempt records in batches (PostgreSQL)', () => {
  it('writes a refused batch again one attempt at a time', async () => {
    const { sizes, three } = recorder(() => new Error('value out of range'));
    const settled = await three();
    assert.ok(settled.every((s) => s.status === 'rejected'));
    // The first alone, the next two together, then each of those alone.
    assert.deepEqual(sizes, [1, 2, 1, 1]);
  });

  it('fails a batch whole when the database cannot be reached: no attempt alone after', async () => {
    const { sizes, three } = recorder(() => new StoreUnavailableError(new Error('ECONNREFUSED')));
    const settled = await three();
    assert.ok(settled.every((s) => s.status === 'rejected'));
    assert.deepEqual(sizes, [1, 2]);
  });

  it("writes a deadlock's victim again once, whole", async () => {
    const { sizes, three } = recorder((_, call) => (call === 2 ? raced('40P01') : undefined));
    const settled = await three();
    assert.deepEqual(
      settled.map((s) => s.status === 'fulfilled' && s.value),
      [true, true, true],
    );
    assert.deepEqual(sizes, [1, 2, 2], 'the first alone, the next two, again after the deadlock');
  });

  it('fails a batch that loses its race twice, without writing its attempts alone', async () => {
    const { sizes, three } = recorder((size) => (size > 1 ? raced('40001') : undefined));
    const settled = await three();
    assert.deepEqual(
      settled.map((s) => s.status),
      ['fulfilled', 'rejected', 'rejected'],
    );
    assert.deepEqual(sizes, [1, 2, 2]);
  });
});
