import { resolve } from 'node:path';
import { parse } from 'pg-connection-string';
import { type Log, silentLog } from '../core/log.js';
import { type Metrics, noMetrics } from '../core/metrics.js';
import type { Durability, Store } from './store.js';

/** Where the data lives: a SQLite file, or a PostgreSQL database when a URL is given. */
export interface StoreConfig {
  /** SQLite database file, used when `databaseUrl` is absent. */
  db: string;
  /** `postgres://...`: use PostgreSQL instead of SQLite. */
  databaseUrl?: string;
  durability?: Durability;
  /** PostgreSQL connections per process. */
  poolSize?: number;
  /**
   * false: open only a database plantstore has migrated before, else NoDatabaseError (for
   * commands that only read). Defaults to true: create and migrate as needed.
   */
  create?: boolean;
}

export const isPostgresUrl = (url: string): boolean => /^postgres(?:ql)?:\/\//i.test(url);

/** Which database `openStore` opens for the configuration. */
export const databaseKind = (config: Pick<StoreConfig, 'databaseUrl'>): 'sqlite' | 'postgres' =>
  config.databaseUrl === undefined ? 'sqlite' : 'postgres';

/**
 * Opens (creating and migrating as needed) the store the configuration names. Each
 * adapter is loaded only when used, so SQLite users never load pg and vice versa. `log`
 * hears of the failures the store gets over by itself (see the adapters' open.ts).
 */
export async function openStore(
  config: StoreConfig,
  log: Log = silentLog,
  metrics: Metrics = noMetrics,
): Promise<Store> {
  if (config.databaseUrl !== undefined) {
    const { openPostgresStore } = await import('./postgres/open.js');
    return openPostgresStore(
      {
        url: config.databaseUrl,
        ...(config.durability && { durability: config.durability }),
        ...(config.poolSize && { poolSize: config.poolSize }),
        ...(config.create === false && { create: false }),
      },
      log,
      metrics,
    );
  }
  const { openSqliteStore } = await import('./sqlite/open.js');
  return openSqliteStore(
    {
      file: config.db,
      ...(config.durability && { durability: config.durability }),
      ...(config.create === false && { create: false }),
    },
    log,
    metrics,
  );
}

/**
 * Which database the configuration names, for people: the SQLite file's absolute path, or
 * the PostgreSQL database, host and user. Never the password.
 */
export function describeStore(config: Pick<StoreConfig, 'db' | 'databaseUrl'>): string {
  if (config.databaseUrl === undefined) {
    return config.db === ':memory:'
      ? 'SQLite database in memory'
      : `SQLite database ${resolve(config.db)}`;
  }
  const { host, port, database, user } = parse(config.databaseUrl);
  const hostName = host?.includes(':') ? `[${host}]` : host || 'the default host';
  const where = port ? `${hostName}:${port}` : hostName;
  const name = database ? `"${database}"` : '(the default)';
  return `PostgreSQL database ${name} on ${where}${user ? ` as ${user}` : ''}`;
}
