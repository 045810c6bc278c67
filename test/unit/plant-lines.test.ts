import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PlantLines } from '../../src/store/postgres/plant-lines.js';
import { postgresPlants } from '../../src/store/postgres/plants.js';
import type { Query } from '../../src/store/postgres/query.js';

// Writes of one plant wait in line on PostgreSQL, so that only one of them holds a pooled
// connection while it waits for the plant's row lock. Driven by a fake query: each statement
// waits until the test settles it.

interface Statement {
  name: string;
  id: string;
  settle(rows: object[] | Error): void;
}

function fakeQuery() {
  const started: Statement[] = [];
  const query = ((name: string, _text: string, values: unknown[]) =>
    new Promise((resolve, reject) => {
      started.push({
        name,
        id: String(values[0]),
        settle: (rows) => (rows instanceof Error ? reject(rows) : resolve({ rows })),
      });
    })) as unknown as Query;
  return { query, started };
}

const turns = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};
const row = (id: number) => ({
  old_id: BigInt(id),
  id: BigInt(id),
  name: 'p',
  tag: null,
  version: 2n,
});

test('changes and deletes of one plant run one after another; other plants do not wait', async () => {
  const { query, started } = fakeQuery();
  const plants = postgresPlants(query, () => undefined);
  const first = plants.update(1n, { name: 'a' });
  const second = plants.update(1n, { name: 'b' });
  const third = plants.delete(1n);
  const other = plants.update(2n, { name: 'c' });
  await turns();
  assert.deepEqual(
    started.map((s) => `${s.name} ${s.id}`),
    ['plants.update 1', 'plants.update 2'],
  );
  started[0]!.settle([row(1)]);
  assert.equal((await first)?.name, 'p');
  await turns();
  assert.equal(started.length, 3);
  assert.equal(`${started[2]!.name} ${started[2]!.id}`, 'plants.update 1');
  // A write that fails leaves the line going on: its caller gets the error, the next runs.
  started[2]!.settle(new Error('statement failed'));
  await assert.rejects(second, /statement failed/);
  await turns();
  assert.equal(`${started[3]!.name} ${started[3]!.id}`, 'plants.delete 1');
  started[3]!.settle([row(1)]);
  assert.equal(await third, true);
  started[1]!.settle([row(2)]);
  assert.equal((await other)?.name, 'p');
});

test('a line is forgotten once its writes have ended', async () => {
  const lines = new PlantLines();
  let release!: () => void;
  const held = lines.run(7n, () => new Promise<void>((resolve) => (release = resolve)));
  const next = lines.run(7n, async () => 'done');
  assert.equal(lines.size, 1);
  release();
  await held;
  assert.equal(await next, 'done');
  await turns();
  assert.equal(lines.size, 0);
});
