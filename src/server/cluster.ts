import cluster, { type Worker } from 'node:cluster';
import pino from 'pino';
import { openStore, type StoreConfig } from '../store/open.js';
import { STATEMENT_TIMEOUT_MS } from '../store/postgres/timeouts.js';
import { stdoutLogDestination } from './log-destination.js';
import { type MetricsListen, serveClusterMetrics } from './metrics.js';
import type { ProcessControl } from './process-control.js';

/**
 * How long the primary waits for workers to stop before killing them: longer than a
 * worker's own worst case (its grace period, then closing the store behind a statement
 * that may run out its timeout).
 */
const workerStopBackstopMs = (shutdownGraceMs: number) =>
  shutdownGraceMs + STATEMENT_TIMEOUT_MS + 5_000;

/** A worker that dies sooner than this after its start is restarted only after a pause. */
const CRASH_LOOP_MS = 1_000;

export interface PrimaryOptions {
  workers: number;
  store: StoreConfig;
  /** The database as the start-up line names it (see src/cli/database.ts). */
  databaseName: string;
  logLevel: string;
  /** The workers' --shutdown-grace. */
  shutdownGraceMs: number;
  /** Where to serve the workers' metrics, summed (see metrics.ts). */
  metrics?: MetricsListen;
}

/**
 * The primary of `serve --workers N`: migrates once, forks N workers that share the port
 * (node:cluster hands them connections in turn), restarts a worker that dies, and on
 * SIGTERM/SIGINT (as `control` reports them) passes the signal on, waits for every worker
 * to drain, and exits 0 through `control` (1 if a worker failed to stop cleanly).
 */
export async function runPrimary(options: PrimaryOptions, control: ProcessControl): Promise<void> {
  // The workers' destination too: JSON lines, or lines for a person on a terminal.
  const log = pino({ level: options.logLevel }, stdoutLogDestination());
  // Migrating here first means the workers find the schema ready (they would queue
  // on the migration lock anyway).
  const store = await openStore(options.store);
  await store.close();

  let stopping = false;
  let failed = false;
  // Until a worker has listened, a dying worker means the service cannot start (port
  // taken, database down): give up like a single process would, instead of looping.
  let anyListened = false;
  cluster.on('listening', () => {
    anyListened = true;
  });
  const started = new Map<Worker, number>();
  const restarts = new Set<NodeJS.Timeout>();
  const fork = () => {
    // A restart due after shutdown began would start a worker nobody stops.
    if (stopping) return;
    started.set(cluster.fork(), Date.now());
  };

  cluster.on('exit', (worker, code, signal) => {
    const uptime = Date.now() - (started.get(worker) ?? 0);
    started.delete(worker);
    if (stopping) {
      // Killed by the SIGTERM we sent before it installed its handler: that is a stop.
      if (code !== 0 && signal !== 'SIGTERM') failed = true;
      if (started.size === 0) {
        log.info({ failed }, 'stopped');
        control.exit(failed ? 1 : 0);
      }
      return;
    }
    if (!anyListened) {
      log.fatal({ worker: worker.process.pid, code, signal }, 'worker failed to start; stopping');
      stopping = true;
      for (const other of started.keys()) other.process.kill('SIGTERM');
      if (started.size === 0) control.exit(1);
      failed = true;
      return;
    }
    log.error({ worker: worker.process.pid, code, signal }, 'worker died; starting another');
    const timer = setTimeout(
      () => {
        restarts.delete(timer);
        fork();
      },
      uptime < CRASH_LOOP_MS ? CRASH_LOOP_MS : 0,
    );
    restarts.add(timer);
  });

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    for (const timer of restarts) clearTimeout(timer);
    restarts.clear();
    log.info({ signal, workers: started.size }, 'shutting down');
    if (started.size === 0) control.exit(0);
    for (const worker of started.keys()) worker.process.kill('SIGTERM');
    // Each worker cuts its own stragglers after the grace period; this is the backstop.
    setTimeout(() => {
      for (const worker of started.keys()) worker.process.kill('SIGKILL');
    }, workerStopBackstopMs(options.shutdownGraceMs)).unref();
  };
  control.onStopSignal(stop);

  if (options.metrics !== undefined) (await serveClusterMetrics(options.metrics, log)).unref();
  for (let i = 0; i < options.workers; i++) fork();
  log.info(
    { workers: options.workers, database: options.databaseName },
    `primary started; workers use ${options.databaseName}`,
  );
}
