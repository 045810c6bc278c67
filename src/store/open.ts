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
}

export const isPostgresUrl = (url: string): boolean => /^postgres(?:ql)?:\/\//i.test(url);

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
    },
    log,
    metrics,
  );
}
