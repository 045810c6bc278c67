import Database from 'better-sqlite3';
import { type Log, silentLog } from '../../core/log.js';
import { loadMigrations, type MigrationReport } from '../migrations.js';
import type { Durability, Store } from '../store.js';
import { sqliteAudit } from './audit.js';
import { GroupCommit } from './group-commit.js';
import { sqliteIdempotency } from './idempotency.js';
import { migrateSqlite } from './migrate.js';
import { sqlitePlants } from './plants.js';
import { createPrivately } from './private-files.js';
import { guard } from './query.js';
import { sqliteTokens } from './tokens.js';
import { MessageSignal } from '../webhook-rows.js';
import { sqliteWebhookQueue } from './webhook-queue.js';
import { sqliteOutbox, sqliteWebhooks } from './webhooks.js';

/** How long a write waits for a lock another process holds before giving up. */
export const BUSY_TIMEOUT_MS = 200;

export interface SqliteOptions {
  /** Path of the database file; created (0600) with its directory (0700) if missing. */
  file: string;
  durability?: Durability;
}

/**
 * Opens (creating and migrating if needed) a SQLite database as a Store. `log` hears of the
 * failures the store gets over by itself: a database that fails to close after a failed open.
 */
export function openSqliteStore(
  { file, durability = 'power' }: SqliteOptions,
  log: Log = silentLog,
): Store {
  if (file !== ':memory:') createPrivately(file);
  const db = new Database(file);
  let migration: MigrationReport;
  try {
    configure(db, durability);
    migration = migrateSqlite(db, loadMigrations('sqlite'));
  } catch (error) {
    closeAfterFailure(db, log);
    throw error;
  }
  const batches = new GroupCommit(db);
  const signal = new MessageSignal(log);
  const wake = () => signal.fire();
  const plants = sqlitePlants(db, batches, sqliteOutbox(db), wake);
  const tokens = sqliteTokens(db, batches);
  const audit = sqliteAudit(db);
  const idempotency = sqliteIdempotency(db, batches);
  const webhooks = sqliteWebhooks(db, batches, wake);
  const webhookQueue = sqliteWebhookQueue(db, batches, signal);
  // Reads a page of the file, so a locked or broken database fails the ping.
  const ping = db.prepare('SELECT max(version) FROM schema_migrations');
  return {
    plants,
    tokens,
    audit,
    idempotency,
    webhooks,
    webhookQueue,
    migration,
    async ping() {
      guard(() => ping.get());
    },
    async close() {
      if (!db.open) return;
      batches.flushAll();
      db.close();
    },
  };
}

/** The connection's settings, before anything else runs on it. */
function configure(db: Database.Database, durability: Durability): void {
  // In WAL mode, FULL fsyncs the WAL at every commit; NORMAL leaves committed
  // transactions in the OS page cache, which outlives the process but not the machine.
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${durability === 'power' ? 'FULL' : 'NORMAL'}`);
  // better-sqlite3 waits for a lock synchronously, stalling every request meanwhile:
  // wait briefly, then answer 503 (StoreUnavailableError) and let the client retry.
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  db.defaultSafeIntegers(true);
}

/** Closes a database that failed to open; the open's own error is the one to throw. */
function closeAfterFailure(db: Database.Database, log: Log): void {
  try {
    db.close();
  } catch (error) {
    log.warn({ err: error }, 'closing the SQLite database after a failed open failed');
  }
}
