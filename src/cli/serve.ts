import pino from 'pino';
import { redacted } from '../http/app.js';
import { openStore, type StoreConfig } from '../store/open.js';
import { composeApp, type ComposeOptions } from './compose.js';
import {
  type RunningDelivery,
  startDelivery,
  type WebhookDelivery,
  webhookDestinations,
} from './webhooks.js';

/** What `serve` passes on to the app: the limits, rate limits and CORS of the HTTP edge. */
export type EdgeOptions = Pick<
  ComposeOptions,
  | 'maxConnections'
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
  logLevel: string;
  /** On shutdown, requests still running after this are cut off. */
  shutdownGraceMs: number;
  webhooks: WebhookDelivery;
}

/**
 * Opens the store, listens, delivers webhooks, and on SIGTERM/SIGINT stops accepting
 * connections and claiming messages, lets in-flight requests and webhook attempts finish
 * (those still running after the grace period are cut off; an attempt cut off is sent
 * again by whichever process claims it after its lease), closes the store and exits 0.
 */
export async function serve({
  host,
  port,
  store: storeConfig,
  logLevel,
  shutdownGraceMs,
  webhooks,
  ...edge
}: ServeOptions): Promise<void> {
  // One logger for the store, the services and the app, so that what the store says while
  // it opens (migrations, a pool connection lost) reaches the same log as the requests.
  const logger = pino(redacted({ level: logLevel }));
  const store = await openStore(storeConfig, logger);
  const app = composeApp({
    store,
    logger,
    webhookDestinations: webhookDestinations(webhooks),
    ...edge,
  });
  let delivery: RunningDelivery | undefined;
  let stopping = false;
  // Never rejects: any failure is logged and ends the process with 1.
  const stop = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    try {
      app.log.info({ signal }, 'shutting down');
      // Requests still running after the grace period are cut off rather than awaited forever.
      setTimeout(() => app.server.closeAllConnections(), shutdownGraceMs).unref();
      await Promise.all([app.close(), delivery?.stop(shutdownGraceMs)]);
      await store.close();
      app.log.info('stopped');
      process.exit(0);
    } catch (error) {
      app.log.error({ err: error }, 'shutdown failed');
      process.exit(1);
    }
  };
  // The shutdown runs on its own; stop handles its own errors, so nothing awaits it.
  process.once('SIGTERM', (signal) => void stop(signal));
  process.once('SIGINT', (signal) => void stop(signal));
  try {
    await app.listen({ host, port });
  } catch (error) {
    await store.close();
    throw error;
  }
  // Started once the port is ours: a process that fails to start sends nothing.
  if (!stopping) delivery = startDelivery(store, webhooks, app.log);
}
