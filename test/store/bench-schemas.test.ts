import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { dropUndroppedSchemas, seedSchema } from '../../bench/postgres.js';
import { POSTGRES_SKIP, POSTGRES_URL } from '../helpers/postgres.js';
import { makeTempDir } from '../helpers/temp-dir.js';

// A benchmark interrupted by a signal leaves no schema behind: bench/run.ts calls
// dropUndroppedSchemas then, since the phases' own cleanup does not run.

async function schemaExists(name: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [
      name,
    ]);
    return rowCount === 1;
  } finally {
    await client.end();
  }
}

const schemaOf = (url: string) => /search_path=([a-z0-9_]+)/.exec(decodeURIComponent(url))![1]!;

describe('the benchmark’s PostgreSQL schemas', { skip: POSTGRES_SKIP }, () => {
  it('drops the ones not dropped yet, and only those', async (t) => {
    const dir = makeTempDir(t);
    const dropped = await seedSchema(POSTGRES_URL!, 10, join(dir, 'a.tokens'));
    const left = await seedSchema(POSTGRES_URL!, 10, join(dir, 'b.tokens'));
    await dropped.drop();
    const lines: string[] = [];
    await dropUndroppedSchemas((line) => lines.push(line));
    assert.equal(await schemaExists(schemaOf(left.url)), false);
    assert.deepEqual(lines, [`dropped the PostgreSQL schema ${schemaOf(left.url)}`]);
    // The seeding client of the left schema is still open, as it is when a run is cut off.
    await left.keeper.client.end();
    await dropUndroppedSchemas((line) => lines.push(line));
    assert.equal(lines.length, 1, 'nothing left to drop');
  });
});
