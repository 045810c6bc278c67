import type { Command } from 'commander';
import { describeStore, openStore } from '../store/open.js';
import { NoDatabaseError } from '../store/migrations.js';
import type { Store } from '../store/store.js';
import { type DatabaseOptions, storeConfig } from './options.js';

/**
 * The database a command works on, for the lines that name it: the file's absolute path or
 * PostgreSQL's host and database, and the variable it came from when it came from the
 * environment (an `export DATABASE_URL` forgotten in a shell otherwise goes unnoticed).
 */
export function databaseName(options: DatabaseOptions, command: Command): string {
  return describeStore(options) + databaseOrigin(options, command);
}

/** ` (from DATABASE_URL)` or ` (from PLANTSTORE_DB)` when the environment chose it, else ''. */
function databaseOrigin(options: DatabaseOptions, command: Command): string {
  const postgres = options.databaseUrl !== undefined;
  const fromEnv = command.getOptionValueSource(postgres ? 'databaseUrl' : 'db') === 'env';
  return fromEnv ? ` (from ${postgres ? 'DATABASE_URL' : 'PLANTSTORE_DB'})` : '';
}

/** An open store and the name of its database. */
export interface OpenDatabase {
  store: Store;
  name: string;
  /** This command created the database's schema: it was new. */
  created: boolean;
}

/**
 * Opens the database for a command. `create: false` for commands that only read or change
 * what is there (`token list`, `audit`, `token revoke`): a mistyped path must not leave an
 * empty database behind and print an empty answer as if all were well.
 */
export async function openDatabase(
  options: DatabaseOptions,
  command: Command,
  { create }: { create: boolean },
): Promise<OpenDatabase> {
  const name = databaseName(options, command);
  let store: Store;
  try {
    store = await openStore({ ...storeConfig(options), create });
  } catch (error) {
    if (!(error instanceof NoDatabaseError)) throw error;
    throw new Error(
      `${error.message}${databaseOrigin(options, command)}; ` +
        `"${commandPath(command)}" creates none: check --db or --database-url, ` +
        'or create the database with "plantstore migrate"',
    );
  }
  return { store, name, created: store.migration.from === 0 };
}

/** Runs `work` on the database, closing it whatever happens. */
export async function withDatabase<T>(
  options: DatabaseOptions,
  command: Command,
  mode: { create: boolean },
  work: (database: OpenDatabase) => Promise<T>,
): Promise<T> {
  const database = await openDatabase(options, command, mode);
  try {
    return await work(database);
  } finally {
    await database.store.close();
  }
}

/** `token list`, as the user typed it. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at?.parent; at = at.parent) names.unshift(at.name());
  return names.join(' ');
}

/** `SQLite database /srv/data/plantstore.db`, or `the new SQLite ...` when this command made it. */
export const named = ({ name, created }: OpenDatabase): string =>
  created ? `the new ${name}` : name;
