import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import { type Log, silentLog } from '../../core/log.js';
import { type Metrics, noMetrics } from '../../core/metrics.js';
import { loadMigrations, type MigrationReport, NoDatabaseError } from '../migrations.js';
import type { Durability, FanOutWake, Store } from '../store.js';
import { sqliteAudit } from './audit.js';
import { GroupCommit } from './group-commit.js';
import { sqliteIdempotency } from './idempotency.js';
import { migrateSqlite } from './migrate.js';
import { sqliteEventLog } from './plant-events.js';
import { sqlitePlants } from './plants.js';
import { createPrivately, databaseFileExists } from './private-files.js';
import { guard } from './query.js';
import { sqliteTokens } from './tokens.js';
import type { EventRow } from '../event-rows.js';
import { MessageSignal } from '../webhook-rows.js';
import { sqliteWebhookEvents } from './webhook-events.js';
import { sqliteWebhookQueue } from './webhook-queue.js';
import { sqliteWebhooks } from './webhooks.js';

/** How long a write waits for a lock another process holds before giving up. */
export const BUSY_TIMEOUT_MS = 200;

/**
 * How much of the database file SQLite reads through a memory map rather than read(2):
 * 2 GiB, the most better-sqlite3's build allows (SQLITE_MAX_MMAP_SIZE; it caps a larger ask).
 * Without it a store larger than SQLite's own cache (16 MB) pays a system call and a copy
 * into that cache for most reads, so reads slowed as the store grew: GET /plants/{id} on 1M
 * plants cost about 9% more CPU than on 10k, none with the map (bench/HISTORY.md). The pages
 * are the operating system's page cache, shared by `--workers` processes, not memory of
 * ours. The price: a disk's read error reaches the process as SIGBUS rather than as an
 * error SQLite returns (docs/running.md).
 */
const MMAP_BYTES = 2 ** 31;

export interface SqliteOptions {
  /** Path of the database file; created (0600) with its directory (0700) if missing. */
  file: string;
  durability?: Durability;
  /** false: refuse (NoDatabaseError) a file that is missing or holds no plantstore schema. */
  create?: boolean;
}

/**
 * Opens (creating and migrating if needed) a SQLite database as a Store. `log` hears of the
 * failures the store gets over by itself: a database that fails to close after a failed open.
 */
export function openSqliteStore(
  { file, durability = 'power', create = true }: SqliteOptions,
  log: Log = silentLog,
  metrics: Metrics = noMetrics,
): Store {
  const { db, migration } = openDatabase(file, durability, create, log);
  const batches = new GroupCommit(db, log, metrics);
  // This process's commits that may give the fan-out work (plant writes; ended messages and
  // changed endpoints, which may make room) or wrote messages (fan-outs, retries); other
  // processes' are found by polling.
  const wakes = new MessageSignal<FanOutWake>(log);
  const messages = new MessageSignal(log);
  // The changes feed: fired after this process's commits that changed plants, with their
  // audit entries; and by the poll of other processes' commits, without.
  const appended = new MessageSignal<readonly EventRow[] | undefined>(log);
  const plants = sqlitePlants(db, batches, {
    appended: (entries) => {
      appended.fire(entries);
      wakes.fire('events');
    },
  });
  const room = () => wakes.fire('room');
  const tokens = sqliteTokens(db, batches);
  const audit = sqliteAudit(db, batches);
  const idempotency = sqliteIdempotency(db, batches);
  const webhooks = sqliteWebhooks(db, batches, () => messages.fire(), room);
  const webhookEvents = sqliteWebhookEvents(db, batches, wakes, messages);
  const webhookQueue = sqliteWebhookQueue(db, batches, messages, room);
  // Reads a page of the file, so a locked or broken database fails the ping.
  const ping = db.prepare('SELECT max(version) FROM schema_migrations');
  return {
    plants,
    tokens,
    audit,
    idempotency,
    webhooks,
    webhookEvents,
    webhookQueue,
    events: sqliteEventLog(db, batches, appended, log),
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

/** The database file opened, configured and migrated (see SqliteOptions for `create`). */
function openDatabase(
  file: string,
  durability: Durability,
  create: boolean,
  log: Log,
): { db: Database.Database; migration: MigrationReport } {
  const memory = file === ':memory:';
  if (!create && (memory || !databaseFileExists(file))) {
    throw new NoDatabaseError(memory ? 'in memory' : `at ${resolve(file)}`);
  }
  if (create && !memory) createPrivately(file);
  const db = new Database(file, { fileMustExist: !create });
  try {
    if (!create && !hasSchema(db)) throw new NoDatabaseError(`in ${resolve(file)}`);
    configure(db, durability);
    return { db, migration: migrateSqlite(db, loadMigrations('sqlite')) };
  } catch (error) {
    closeAfterFailure(db, log);
    throw error;
  }
}

/** Whether plantstore ever migrated this database (another application's file holds none). */
function hasSchema(db: Database.Database): boolean {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  return table.get('schema_migrations') !== undefined;
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
  db.pragma(`mmap_size = ${MMAP_BYTES}`);
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
