import pino from 'pino';
import { EVENT_LIMITS } from '../core/change-events.js';
import { redacted } from '../http/app.js';
import { unansweredRequests } from '../http/connections.js';
import { databaseKind, openStore, type StoreConfig } from '../store/open.js';
import type { Store } from '../store/store.js';
import { Maintenance } from '../service/maintenance.js';
import { composeApp, type ComposeOptions } from './compose.js';
import { stdoutLogDestination } from './log-destination.js';
import type { MetricsOption } from './metrics.js';
import {
  type RunningDelivery,
  startDelivery,
  type WebhookDelivery,
  webhookDestinations,
} from './webhook-delivery.js';
import type { ProcessControl } from './process-control.js';
import { pinoRequestLine } from './request-line.js';

/** What `serve` passes on to the app: the limits, rate limits and CORS of the HTTP edge. */
export type EdgeOptions = Pick<
  ComposeOptions,
  | 'maxConnections'
  | 'inFlightPerToken'
  | 'requestTimeoutMs'
  | 'headersTimeoutMs'
  | 'keepAliveTimeoutMs'
  | 'sendTimeoutMs'
  | 'corsOrigins'
  | 'rateLimits'
  | 'trustProxy'
>;

export interface ServeOptions extends EdgeOptions {
  host: string;
  port: number;
  store: StoreConfig;
  /** The database as the start-up line names it (see src/cli/database.ts). */
  databaseName: string;
  logLevel: string;
  /** On shutdown, requests still running after this are cut off. */
  shutdownGraceMs: number;
  /** Serve Prometheus metrics; nothing is measured when absent. */
  metrics?: MetricsOption;
  webhooks: WebhookDelivery;
  /** Audit entries older than this are deleted; kept forever when absent. */
  auditRetentionMs?: number;
  /** Events of the changes feed older than this are deleted; kept forever when absent. */
  eventsRetentionMs?: number;
  /** Event streams and long polls open at once, at most (EVENT_LIMITS.maxStreams if absent). */
  maxEventStreams?: number;
}

/**
 * Opens the store, listens, delivers webhooks, and when `control` reports SIGTERM/SIGINT
 * stops accepting connections and claiming messages, lets in-flight requests and webhook
 * attempts finish (those still running after the grace period are cut off; an attempt cut
 * off is sent again by whichever process claims it after its lease), closes the store and
 * exits 0 through `control`.
 */
export async function serve(
  {
    host,
    port,
    store: storeConfig,
    databaseName,
    logLevel,
    shutdownGraceMs,
    metrics: metricsOption,
    webhooks,
    auditRetentionMs,
    eventsRetentionMs,
    maxEventStreams,
    ...edge
  }: ServeOptions,
  control: ProcessControl,
): Promise<void> {
  // One logger for the store, the services and the app, so that what the store says while
  // it opens (migrations, a pool connection lost) reaches the same log as the requests.
  // One write per turn of the event loop instead of one per line (see log-destination.ts).
  const destination = stdoutLogDestination();
  const logger = pino(redacted({ level: logLevel }), destination);
  // The gauges read the store at each scrape, and the store is opened measured.
  const opened: { store?: Store } = {};
  const sources = {
    database: databaseKind(storeConfig),
    pool: () => opened.store?.connections?.(),
    queueDepth: async () => opened.store?.webhookQueue.depth(),
  };
  // Loaded only when asked for: prom-client and what it brings took 60 to 80 ms of each start.
  const measuring =
    metricsOption &&
    (await (await import('./metrics.js')).startMetrics(metricsOption, sources, logger));
  const store = await openStore(storeConfig, logger, measuring?.metrics);
  opened.store = store;
  // Which database, and how safely it writes, said once: "Server listening" says neither,
  // and a DATABASE_URL left in the environment would otherwise switch databases unseen.
  const durability = storeConfig.durability ?? 'power';
  logger.info(
    { database: databaseName, durability },
    `using ${databaseName}, durability ${durability}`,
  );
  // The feed reads the audit trail: what the trail's retention deletes, the feed loses too.
  const feedKeeps = eventsRetentionMs ?? EVENT_LIMITS.retentionMs;
  if (auditRetentionMs !== undefined && auditRetentionMs < feedKeeps) {
    logger.warn(
      { auditRetentionMs, eventsRetentionMs: feedKeeps },
      'the audit retention is shorter than the events retention: the changes feed keeps ' +
        'only what the audit trail keeps',
    );
  }
  const app = composeApp({
    store,
    logger,
    requestLine: pinoRequestLine(logger, destination),
    webhookDestinations: webhookDestinations(webhooks),
    webhookMaxEndpoints: webhooks.maxEndpoints,
    ...(maxEventStreams !== undefined && { events: { maxStreams: maxEventStreams } }),
    ...edge,
    ...(measuring && { metrics: measuring.metrics }),
  });
  const maintenance = new Maintenance(store, {
    log: app.log,
    ...(auditRetentionMs !== undefined && { auditRetentionMs }),
    ...(eventsRetentionMs !== undefined && { eventsRetentionMs }),
  });
  let delivery: RunningDelivery | undefined;
  let stopping = false;
  // Never rejects: any failure is logged and ends the process with 1.
  const stop = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    try {
      app.log.info({ signal }, 'shutting down');
      // Requests still running after the grace period are cut off rather than awaited forever,
      // and said to be: a request cut off before its answer has no request line of its own.
      setTimeout(() => {
        const requests = unansweredRequests(app.server);
        if (requests > 0) {
          app.log.warn(
            { requests, shutdownGraceMs },
            'requests still running after the shutdown grace were cut off',
          );
        }
        app.server.closeAllConnections();
      }, shutdownGraceMs).unref();
      await Promise.all([app.close(), delivery?.stop(shutdownGraceMs), maintenance.stop()]);
      await store.close();
      await measuring?.close();
      app.log.info('stopped');
      control.exit(0);
    } catch (error) {
      app.log.error({ err: error }, 'shutdown failed');
      control.exit(1);
    }
  };
  // The shutdown runs on its own; stop handles its own errors, so nothing awaits it.
  control.onStopSignal((signal) => void stop(signal));
  try {
    await app.listen({ host, port });
  } catch (error) {
    await store.close();
    await measuring?.close();
    throw error;
  }
  // Started once the port is ours: a process that fails to start sends nothing.
  if (!stopping) {
    delivery = startDelivery(store, webhooks, app.log, measuring?.metrics);
    // A first round at once: a store upgraded from an older schema has a backlog to prune.
    maintenance.start({ now: true });
  }
}
