import type { FastifyServerOptions } from 'fastify';
import { openStore, type StoreConfig } from '../store/open.js';
import { buildApp } from './app.js';
import type { RateLimitOptions } from '../core/rate-limit.js';
import { SHUTDOWN_GRACE_MS } from './limits.js';

export interface ServeOptions {
  host: string;
  port: number;
  store: StoreConfig;
  logLevel: string;
  maxConnections: number;
  rateLimits: RateLimitOptions;
  trustProxy: string | false;
}

/**
 * Opens the store, listens, and on SIGTERM/SIGINT stops accepting connections, lets
 * in-flight requests finish, closes the store and exits 0.
 */
export async function serve(options: ServeOptions): Promise<void> {
  const store = await openStore(options.store);
  const logger: FastifyServerOptions['logger'] = { level: options.logLevel };
  const app = buildApp({
    store,
    logger,
    maxConnections: options.maxConnections,
    rateLimits: options.rateLimits,
    trustProxy: options.trustProxy,
  });
  let stopping = false;
  const stop = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    // Requests still running after the grace period are cut off rather than awaited forever.
    setTimeout(() => app.server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
    try {
      await app.close();
      await store.close();
      app.log.info('stopped');
      process.exit(0);
    } catch (error) {
      app.log.error({ err: error }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  try {
    await app.listen({ host: options.host, port: options.port });
  } catch (error) {
    await store.close();
    throw error;
  }
}
