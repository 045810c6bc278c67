import { randomBytes } from 'node:crypto';
import type { TestContext } from 'node:test';
import pg from 'pg';
import { askedFor, leftOut } from './backend-filter.js';
import { startProxy, type TcpProxy } from './tcp-proxy.js';

/**
 * The PostgreSQL the tests may use: a URL of a database they may create schemas in
 * (`.ci/run` sets it). Unset, the PostgreSQL tests are skipped, and say so; unset while
 * PLANTSTORE_TEST_BACKENDS asks for postgres (as `.ci/run` does), every test file fails.
 */
export const POSTGRES_URL = process.env.PLANTSTORE_TEST_DATABASE_URL || undefined;

/** Why the PostgreSQL tests are skipped here, or false. */
export const POSTGRES_SKIP = postgresSkip();

function postgresSkip(): string | false {
  const filtered = leftOut('postgres');
  if (filtered) return `${filtered}: the PostgreSQL tests are SKIPPED`;
  if (POSTGRES_URL !== undefined) return false;
  if (askedFor('postgres')) {
    throw new Error(
      'PLANTSTORE_TEST_BACKENDS asks for postgres, but PLANTSTORE_TEST_DATABASE_URL is unset',
    );
  }
  return 'PLANTSTORE_TEST_DATABASE_URL is unset: the PostgreSQL tests are SKIPPED';
}

if (POSTGRES_SKIP) process.stderr.write(`\n*** ${POSTGRES_SKIP} ***\n\n`);

/** `url` with every connection's search_path set to `schema`. */
export function withSchema(url: string, schema: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('options', `-c search_path=${schema}`);
  return parsed.toString();
}

/** Runs one statement on a connection of its own. */
export async function adminRun(url: string, sql: string): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

/**
 * Creates `kind` (a schema or a database) for one test with a fresh name, and drops it after
 * the test; returns the name.
 */
async function forOneTest(t: TestContext, url: string, kind: 'SCHEMA' | 'DATABASE') {
  const name = `t_${randomBytes(6).toString('hex')}`;
  await adminRun(url, `CREATE ${kind} ${name}`);
  const drop =
    kind === 'SCHEMA' ? `DROP SCHEMA ${name} CASCADE` : `DROP DATABASE ${name} WITH (FORCE)`;
  t.after(() => adminRun(url, drop));
  return name;
}

/**
 * A new, empty schema for one test (dropped after it), so tests running side by side
 * each see an empty database. Returns a URL whose connections use it.
 */
export async function freshDatabase(t: TestContext, url = POSTGRES_URL!): Promise<string> {
  return withSchema(url, await forOneTest(t, url, 'SCHEMA'));
}

/**
 * A new, empty database of its own for one test (dropped after it), for what a schema does
 * not separate: NOTIFY channels belong to a database, so a test that counts notifications
 * would also hear other tests' writes in other schemas of the same database.
 */
export async function freshOwnDatabase(t: TestContext, url = POSTGRES_URL!): Promise<string> {
  const own = new URL(url);
  own.pathname = `/${await forOneTest(t, url, 'DATABASE')}`;
  own.searchParams.delete('options');
  return own.toString();
}

/**
 * Collects what would crash the process (uncaught exceptions, unhandled rejections) while
 * the test runs, so the test can assert there were none.
 */
export function collectCrashes(t: TestContext): unknown[] {
  const crashes: unknown[] = [];
  const onCrash = (error: unknown) => crashes.push(error);
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);
  t.after(() => {
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
  });
  return crashes;
}

/**
 * A fresh database reached through a TCP proxy the test can cut: `url` goes through the
 * proxy, `direct` does not. Same user, database and `options` (the schema): only the
 * address differs. The proxy is the test's to close (before the store, so the pool's
 * sockets end at once).
 */
export async function databaseBehindProxy(
  t: TestContext,
): Promise<{ url: string; direct: string; proxy: TcpProxy }> {
  const direct = new URL(await freshDatabase(t));
  const proxy = await startProxy(direct.hostname, Number(direct.port || 5432));
  const viaProxy = new URL(direct);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);
  return { url: viaProxy.toString(), direct: direct.toString(), proxy };
}
