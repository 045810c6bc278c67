import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import pg from 'pg';
import { silentLog } from '../../src/core/log.js';
import { loadMigrations } from '../../src/store/migrations.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { POSTGRES_URL, withSchema } from './postgres.js';

// PostgreSQL schemas migrated once and used again. A test that opens a store on its new,
// empty schema (backends.ts) gets, under that schema's name, a schema migrated before by the
// product's own migratePostgres, its rows and sequences set back to what the migrations leave:
// one statement instead of every migration again (a third of a second each on an idle host,
// seconds on a busy one). After the test it is renamed out of the way, for the next one.
// Migrating an empty schema is still what store-postgres.test.ts and every test that migrates
// its schema itself (through the CLI, or to an older version first) do.

/** Schemas given back after their test, their rows not reset yet. */
const returned: string[] = [];
/** The statement that resets a schema (`%s` its name) to what the migrations leave. */
let resetStatement: Promise<string> | undefined;

// After the last test of the file: the schemas given back go.
after(async () => {
  for (const name of returned.splice(0)) await dropSchema(name);
});

const newName = () => `t_${randomBytes(6).toString('hex')}`;

async function run<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * The statement that sets every table but schema_migrations back to the rows the migrations
 * leave in `schema` (just migrated), and every sequence back to where they leave it. DELETE,
 * not TRUNCATE: on tables of a few rows it takes milliseconds, TRUNCATE a tenth of a second
 * (new files for each table and index). Tables that others reference go after those.
 */
async function resetOf(schema: string): Promise<string> {
  return run(async (client) => {
    const relations = await client.query<{ name: string; kind: string }>(
      `SELECT relname AS name, relkind AS kind FROM pg_class
       WHERE relnamespace = $1::regnamespace AND relkind IN ('r', 'p', 'S') ORDER BY relname`,
      [schema],
    );
    const references = await client.query<{ child: string; parent: string }>(
      `SELECT conrelid::regclass::text AS child, confrelid::regclass::text AS parent
       FROM pg_constraint WHERE contype = 'f' AND connamespace = $1::regnamespace`,
      [schema],
    );
    const bare = (name: string) => name.slice(name.lastIndexOf('.') + 1);
    const left = relations.rows
      .filter((r) => r.kind !== 'S' && r.name !== 'schema_migrations')
      .map((r) => r.name);
    const statements: string[] = [];
    while (left.length > 0) {
      // A table no other table left references: its rows can go.
      const next = left.find(
        (table) =>
          !references.rows.some(
            (r) =>
              bare(r.parent) === table && bare(r.child) !== table && left.includes(bare(r.child)),
          ),
      );
      if (next === undefined) throw new Error(`a cycle of references among ${left.join(', ')}`);
      left.splice(left.indexOf(next), 1);
      statements.push(`DELETE FROM %s.${next}`);
    }
    for (const { name } of relations.rows.filter((r) => r.kind !== 'S')) {
      if (name === 'schema_migrations') continue;
      const { rows } = await client.query<{ json: string | null }>(
        `SELECT json_agg(t)::text AS json FROM ${schema}.${name} t`,
      );
      const json = rows[0]!.json;
      if (json === null) continue;
      statements.push(
        `INSERT INTO %s.${name} OVERRIDING SYSTEM VALUE
         SELECT * FROM json_populate_recordset(NULL::%s.${name}, $json$${json}$json$)`,
      );
    }
    for (const { name } of relations.rows.filter((r) => r.kind === 'S')) {
      const { rows } = await client.query<{ last: string; called: boolean }>(
        `SELECT last_value::text AS last, is_called AS called FROM ${schema}.${name}`,
      );
      statements.push(`SELECT setval('%s.${name}', ${rows[0]!.last}, ${rows[0]!.called})`);
    }
    return statements.join(';\n');
  });
}

/** A new schema, migrated by migratePostgres as a plantstore migrates a new database. */
async function migratedAnew(): Promise<string> {
  const name = newName();
  await run((client) => client.query(`CREATE SCHEMA ${name}`));
  await migratePostgres(withSchema(POSTGRES_URL!, name), loadMigrations('postgres'), silentLog);
  resetStatement ??= resetOf(name);
  await resetStatement;
  return name;
}

/**
 * Puts a migrated schema in the place of `schema`, if `schema` is still empty: answers
 * whether it did (the schema is then to be given back after the test, not dropped). One
 * given back by an earlier test is reset and renamed in one transaction.
 */
export async function migratedInPlace(schema: string): Promise<boolean> {
  return run(async (client) => {
    const { rows } = await client.query<{ n: number }>(
      'SELECT count(*)::integer AS n FROM pg_class WHERE relnamespace = $1::regnamespace',
      [schema],
    );
    if (rows[0]!.n !== 0) return false;
    const swap = (ready: string) =>
      `DROP SCHEMA ${schema}; ALTER SCHEMA ${ready} RENAME TO ${schema}`;
    for (let ready = returned.pop(); ready !== undefined; ready = returned.pop()) {
      const reset = (await resetStatement!).replaceAll('%s', ready);
      try {
        await client.query(`BEGIN; ${reset}; ${swap(ready)}; COMMIT`);
        return true;
      } catch {
        await client.query('ROLLBACK');
        await dropSchema(ready);
      }
    }
    const anew = await migratedAnew();
    try {
      await client.query(`BEGIN; ${swap(anew)}; COMMIT`);
    } catch (error) {
      await client.query('ROLLBACK');
      await dropSchema(anew);
      throw error;
    }
    return true;
  });
}

/**
 * After its test: the schema migratedInPlace filled moves out of the way under a new name
 * (a store still open then finds nothing under the old one) and waits for the next test,
 * which resets its rows first.
 */
export async function giveBack(schema: string): Promise<void> {
  const name = newName();
  try {
    await run((client) => client.query(`ALTER SCHEMA ${schema} RENAME TO ${name}`));
    returned.push(name);
  } catch {
    await dropSchema(schema);
  }
}

export async function dropSchema(schema: string): Promise<void> {
  // DROP takes each table's lock in turn: a connection of the test still finishing (a server
  // closing) may hold one and wait for another, and PostgreSQL ends one of the two with a
  // deadlock error (seen once, after webhooks-fairness.test.ts). The drop is tried again.
  for (let tries = 1; ; tries++) {
    try {
      await run((client) => client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`));
      return;
    } catch (error) {
      if (!(error instanceof pg.DatabaseError && error.code === '40P01') || tries === 5) {
        throw error;
      }
    }
  }
}

/** A new, empty schema, with no clean-up of its own (the caller's). */
export async function newSchema(): Promise<string> {
  const name = newName();
  await run((client) => client.query(`CREATE SCHEMA ${name}`));
  return name;
}
