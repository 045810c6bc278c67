import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PLANTSTORE_BIN } from './seed.js';

export interface SeededPostgres {
  url: string;
  token: string;
  drop(): Promise<void>;
}

/** The PostgreSQL to compare with: PLANTSTORE_BENCH_DATABASE_URL, else the local default. */
export const BENCH_POSTGRES_URL =
  process.env.PLANTSTORE_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * A schema of its own in the database at `adminUrl`, migrated by plantstore, with plants
 * 1..n as the SQLite seed has them and a token. Undefined when PostgreSQL is unreachable.
 */
export async function seedPostgres(
  adminUrl: string,
  n: number,
): Promise<SeededPostgres | undefined> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3_000 });
  try {
    await admin.connect();
  } catch {
    return undefined;
  }
  await admin.query(`CREATE SCHEMA ${schema}`);
  const parsed = new URL(adminUrl);
  parsed.searchParams.set('options', `-c search_path=${schema}`);
  const url = parsed.toString();
  const token = execFileSync(
    process.execPath,
    [PLANTSTORE_BIN, 'token', 'create', '--database-url', url],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
  ).trim();
  await admin.query(`SET search_path = ${schema}`);
  await admin.query(
    `INSERT INTO plants (id, name, tag)
     SELECT x, 'plant ' || x, CASE WHEN x % 4 = 0 THEN 'shade' END FROM generate_series(1, $1::bigint) x`,
    [n],
  );
  // Server-assigned ids go on above the seeded ones, as if the server had assigned them.
  await admin.query("SELECT setval('plant_id_seq', $1)", [n]);
  await admin.query('ANALYZE plants');
  return {
    url,
    token,
    async drop() {
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.end();
    },
  };
}
