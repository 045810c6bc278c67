import pg from 'pg';
import { parseIntoClientConfig } from 'pg-connection-string';
import { type Log, silentLog } from '../../core/log.js';
import { type Metrics, noMetrics } from '../../core/metrics.js';
import { loadMigrations } from '../migrations.js';
import type { Durability, FanOutWake, Store } from '../store.js';
import { postgresAudit } from './audit.js';
import { postgresIdempotency } from './idempotency.js';
import { migratePostgres } from './migrate.js';
import { postgresTakenIdsPruner } from './plant-ids.js';
import { EVENTS_CHANNEL, postgresEventLog } from './plant-events.js';
import { postgresPlants } from './plants.js';
import { poolQuery } from './query.js';
import { postgresRateLimits } from './rate-limits.js';
import { INT8_AS_BIGINT } from './int8.js';
import { CONNECT_TIMEOUT_MS, DEFAULT_POOL_SIZE, STATEMENT_TIMEOUT_MS } from './timeouts.js';
import { postgresTokens } from './tokens.js';
import { MessageSignal } from '../webhook-rows.js';
import { WebhookNotifications } from './webhook-listen.js';
import { postgresWebhookQueue } from './webhook-queue.js';
import { postgresWebhookEvents } from './webhook-events.js';
import { postgresWebhooks, WEBHOOK_CHANNEL } from './webhooks.js';

/** The application_name of a serving store's connections: restore looks for them. */
export const SERVING_APPLICATION = 'plantstore';

export interface PostgresOptions {
  /** A `postgres://` or `postgresql://` connection URL. */
  url: string;
  durability?: Durability;
  /** Connections this process keeps at most. */
  poolSize?: number;
  /** false: refuse (NoDatabaseError) a database plantstore never migrated. */
  create?: boolean;
}

/**
 * The connection configuration of a URL, with the settings every connection starts with
 * added to its `options` (after any the URL gives, so these win). They travel in the
 * connection's startup packet: no query of their own, nothing to fail half-way. Every
 * statement here is one autocommit statement written for READ COMMITTED: a stricter default
 * on the database would turn concurrent creates into 40001s. With --durability process, a
 * commit is answered before its WAL is flushed: PostgreSQL's own way of leaving the flush
 * for later (the last commits may be lost, never corrupted).
 */
export function connectionConfig(url: string, durability: Durability): pg.ClientConfig {
  // Parsed as pg parses it: a URL such as postgres://app@/db?host=/run/postgresql is valid.
  const config = parseIntoClientConfig(url);
  // Spaces separate the settings; a space within one is escaped.
  const settings = ['-c default_transaction_isolation=read\\ committed'];
  if (durability === 'process') settings.push('-c synchronous_commit=off');
  return {
    ...config,
    options: [config.options, ...settings].filter(Boolean).join(' '),
    // Every connection of a serving store, the pool's and the one that listens: with the
    // pool idle a while, the listening one is all there is for a restore to find.
    application_name: SERVING_APPLICATION,
  };
}

/**
 * Opens a pool on the database, migrating it first (under a lock, see migrate.ts). `log`
 * hears of the failures the store gets over by itself: a broken idle connection, a failed
 * cleanup after a migration.
 */
export async function openPostgresStore(
  { url, durability = 'power', poolSize = DEFAULT_POOL_SIZE, create = true }: PostgresOptions,
  log: Log = silentLog,
  metrics: Metrics = noMetrics,
): Promise<Store> {
  const migration = await migratePostgres(url, loadMigrations('postgres'), log, { create });
  const pool = createPool(url, durability, poolSize, log);
  const query = poolQuery(pool, metrics);
  let closed = false;
  // This process's commits that may give the fan-out work (plant writes; ended messages and
  // changed endpoints, which may make room) or wrote messages (fan-outs, retries). Each
  // `serve` fans out: no other process needs to hear of them (each looks every second).
  const wakes = new MessageSignal<FanOutWake>(log);
  const messages = new MessageSignal(log);
  // Other processes' messages (NOTIFY in their commits), heard on a LISTEN connection.
  const remote = new MessageSignal(log);
  // The changes feed: this process's plant writes (after their commit), and any process's
  // NOTIFY after its own.
  const written = new MessageSignal(log);
  const appended = new MessageSignal(log);
  const config = connectionConfig(url, durability);
  const notifications = new WebhookNotifications(
    config,
    (channel) => (channel === EVENTS_CHANNEL ? appended : remote).fire(),
    log,
    [WEBHOOK_CHANNEL, EVENTS_CHANNEL],
  );
  // The watermark for the fan-out alone: the store's log is an EventLog like any other.
  const { readable, ...events } = postgresEventLog(
    query,
    written,
    appended,
    () => notifications.start(),
    log,
  );
  const room = () => wakes.fire('room');
  return {
    plants: postgresPlants(query, () => {
      written.fire();
      wakes.fire('events');
    }),
    tokens: postgresTokens(query),
    audit: postgresAudit(query),
    idempotency: postgresIdempotency(query),
    webhooks: postgresWebhooks(query, () => messages.fire(), room),
    webhookEvents: postgresWebhookEvents(
      query,
      readable,
      wakes,
      messages,
      // Asked while the fan-out holds no connection. One in use may be the dispatcher's or the
      // feed's lone statement; two or more, or a caller waiting, is load (the threshold
      // measured in bench/HISTORY.md; a threshold of one was not tried).
      () => pool.waitingCount > 0 || pool.totalCount - pool.idleCount > 1,
    ),
    webhookQueue: postgresWebhookQueue(query, messages, room, log),
    events,
    onRemoteMessages(listener) {
      notifications.start();
      return remote.on(listener);
    },
    rateLimits: postgresRateLimits(query),
    pruneTakenIds: postgresTakenIdsPruner(query),
    migration,
    async ping() {
      await query('ping', 'SELECT 1', []);
    },
    connections: () => ({
      open: pool.totalCount,
      idle: pool.idleCount,
      waiting: pool.waitingCount,
      max: poolSize,
    }),
    async close() {
      if (closed) return;
      closed = true;
      await notifications.close();
      await pool.end();
    },
  };
}

/** The pool every statement runs on, with the bounds of timeouts.ts. */
function createPool(url: string, durability: Durability, poolSize: number, log: Log): pg.Pool {
  const pool = new pg.Pool({
    ...connectionConfig(url, durability),
    max: poolSize,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    statement_timeout: STATEMENT_TIMEOUT_MS,
    // No query_timeout: poolQuery keeps its own read timeout (query.ts).
    keepAlive: true,
    // int8 as bigints, never numbers, in this pool only.
    types: INT8_AS_BIGINT,
  });
  // An idle connection that breaks is dropped by the pool; the next query opens a new
  // one. Without a listener, the error would crash the process.
  pool.on('error', (error) => {
    log.warn({ err: error }, 'an idle PostgreSQL connection failed; the pool drops it');
  });
  return pool;
}
