import { randomBytes } from 'node:crypto';
import type { TestContext } from 'node:test';
import pg from 'pg';

/**
 * The PostgreSQL the tests may use: a URL of a database they may create schemas in
 * (`.ci/run` sets it). Unset, the PostgreSQL tests are skipped, and say so.
 */
export const POSTGRES_URL = process.env.PLANTSTORE_TEST_DATABASE_URL;

export const POSTGRES_SKIP =
  POSTGRES_URL === undefined
    ? 'PLANTSTORE_TEST_DATABASE_URL is unset: the PostgreSQL tests are SKIPPED'
    : false;

if (POSTGRES_SKIP) process.stderr.write(`\n*** ${POSTGRES_SKIP} ***\n\n`);

/** `url` with every connection's search_path set to `schema`. */
export function withSchema(url: string, schema: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('options', `-c search_path=${schema}`);
  return parsed.toString();
}

/**
 * A new, empty schema for one test (dropped after it), so tests running side by side
 * each see an empty database. Returns a URL whose connections use it.
 */
export async function freshDatabase(t: TestContext, url = POSTGRES_URL!): Promise<string> {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await admin.end();
  }
  t.after(async () => {
    const cleanup = new pg.Client({ connectionString: url });
    await cleanup.connect();
    try {
      await cleanup.query(`DROP SCHEMA ${schema} CASCADE`);
    } finally {
      await cleanup.end();
    }
  });
  return withSchema(url, schema);
}
