/**
 * Creates a new, empty PostgreSQL database for one CI run and prints its URL.
 *   tsx scripts/create-test-database.ts postgres://postgres@127.0.0.1:5432/test
 * The URL given is only used to connect; the new database is named plantstore_ci_<random>.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

const admin = process.argv[2];
if (admin === undefined) throw new Error('usage: create-test-database.ts <postgres-url>');
const name = `plantstore_ci_${randomBytes(4).toString('hex')}`;
const client = new pg.Client({ connectionString: admin, connectionTimeoutMillis: 5_000 });
await client.connect();
try {
  await client.query(`CREATE DATABASE ${name}`);
} finally {
  await client.end();
}
const url = new URL(admin);
url.pathname = `/${name}`;
process.stdout.write(`${url.toString()}\n`);
