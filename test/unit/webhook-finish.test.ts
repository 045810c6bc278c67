import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { silentLog } from '../../src/core/log.js';
import { StoreUnavailableError } from '../../src/core/unavailable.js';
import type { Query } from '../../src/store/postgres/query.js';
import { finishInBatches } from '../../src/store/postgres/webhook-finish.js';
import { MessageSignal } from '../../src/store/webhook-rows.js';

// What a failed batch of attempt records does, against a database that fails as the test
// says: the batch statements it is sent, counted.
function recorder(fail: (batchSize: number) => Error) {
  const sizes: number[] = [];
  const query = (async (_name: string, _text: string, values: unknown[]) => {
    const size = (values[0] as string[]).length;
    sizes.push(size);
    throw fail(size);
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
});
