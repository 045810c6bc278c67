import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import client from 'prom-client';
import { limitInstruments } from './limit-metrics.js';
import type { Metrics } from '../core/metrics.js';
import type { PoolState } from '../store/store.js';
import { answerPrimary, NoWorkerYet, WorkerMetrics } from './cluster-metrics.js';
import { RequestTally } from './request-tally.js';

/** Where `/metrics` is served: a listener of its own, so it is never public by accident. */
export interface MetricsListen {
  host: string;
  port: number;
}

// Request latencies from a cached read (~0.1 ms) to the statement timeout (5 s).
const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000];

// prom-client's defaults include these gauges named like counters, which Prometheus' own
// checker (`promtool check metrics`) refuses; each is the sum of its by-type gauge
// (nodejs_active_handles{type}, ...), which stays.
const GAUGES_NAMED_LIKE_COUNTERS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/**
 * prom-client instruments behind the Metrics interface, in `registry`, with Node's own
 * (event-loop lag, heap, GC, CPU) beside them. Only the instruments of `sources.database`
 * are exported: the statement histogram and pool gauges on PostgreSQL (`pool` is read at
 * each scrape), the group-commit histograms on SQLite.
 */
export function prometheusMetrics(registry: client.Registry, sources: MetricSources): Metrics {
  client.collectDefaultMetrics({ register: registry });
  for (const name of GAUGES_NAMED_LIKE_COUNTERS) registry.removeSingleMetric(name);
  const registers = [registry];
  const requests = new RequestTally(LATENCY_BUCKETS);
  new client.Counter({
    name: 'plantstore_http_requests_total',
    help: 'Answered HTTP requests, by route template, method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers,
    collect() {
      this.reset();
      for (const { route, method, statuses } of requests.series.values()) {
        for (const [status, count] of statuses) this.inc({ route, method, status }, count);
      }
    },
  });
  registry.registerMetric(
    requests.histogram(
      'plantstore_http_request_duration_seconds',
      'Time from a request arriving to its answer being sent, by route template and method.',
    ),
  );
  const refusals = new client.Counter({
    name: 'plantstore_rate_limit_refusals_total',
    help: 'Requests answered 429 by a rate limit, by its policy name (token, failed-auth), or in-flight for a token with as many requests in flight as it may have.',
    labelNames: ['policy'] as const,
    registers,
  });
  const database =
    sources.database === 'postgres'
      ? postgresInstruments(registers, sources.pool)
      : sqliteInstruments(registers);
  const webhooks = webhookInstruments(registers, sources.queueDepth);
  return {
    request: (route, method, status, seconds) => requests.add(route, method, status, seconds),
    rateLimited: (policy) => refusals.inc({ policy }),
    statement: (statement, seconds, outcome) =>
      database.statements?.observe({ statement, outcome }, seconds),
    groupCommit(writes, commitSeconds) {
      database.batches?.observe(writes);
      database.commits?.observe(commitSeconds);
    },
    ...limitInstruments(registers),
    webhookAttempt(outcome, lagSeconds, seconds) {
      webhooks.attempts.inc({ outcome });
      webhooks.lag.observe(lagSeconds);
      webhooks.duration.observe(seconds);
    },
  };
}

/** The database in use, and what the metrics read at each scrape. */
export interface MetricSources {
  /** Which database's instruments to export: no pool gauges on SQLite, say. */
  database: 'sqlite' | 'postgres';
  /** The PostgreSQL pool's state. */
  pool?: () => PoolState | undefined;
  /** Webhook messages pending, across every process on the database. */
  queueDepth?: () => Promise<number | undefined>;
}

// From a prompt delivery (~ms) to the last retry of the default schedule (~27 h).
const LAG_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300, 1800, 7200, 36000, 100000];

function webhookInstruments(registers: client.Registry[], queueDepth: MetricSources['queueDepth']) {
  if (queueDepth !== undefined) {
    new client.Gauge({
      name: 'plantstore_webhook_queue_depth',
      help: 'Webhook messages pending delivery, for every process on the database.',
      registers,
      // Each worker counts the whole database's: with --workers, one of them, not the sum.
      aggregator: 'max',
      async collect() {
        const depth = await queueDepth();
        if (depth !== undefined) this.set(depth);
      },
    });
  }
  return {
    attempts: new client.Counter({
      name: 'plantstore_webhook_attempts_total',
      help: 'Webhook attempts by what became of the message: delivered, retry, failed, gone, lease-lost.',
      labelNames: ['outcome'] as const,
      registers,
    }),
    lag: new client.Histogram({
      name: 'plantstore_webhook_delivery_lag_seconds',
      help: "Time from a message's write to the end of an attempt at it.",
      buckets: LAG_BUCKETS,
      registers,
    }),
    duration: new client.Histogram({
      name: 'plantstore_webhook_attempt_duration_seconds',
      help: 'Time one webhook attempt took, connection to answer.',
      buckets: LATENCY_BUCKETS,
      registers,
    }),
  };
}

function sqliteInstruments(registers: client.Registry[]) {
  return {
    batches: new client.Histogram({
      name: 'plantstore_sqlite_group_commit_writes',
      help: 'Writes carried by each SQLite group commit (one transaction, one fsync).',
      buckets: BATCH_BUCKETS,
      registers,
    }),
    commits: new client.Histogram({
      name: 'plantstore_sqlite_commit_duration_seconds',
      help: 'Time in COMMIT of each SQLite group commit: with --durability power, the fsync.',
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    statements: undefined,
  };
}

function postgresInstruments(registers: client.Registry[], pool: MetricSources['pool']) {
  if (pool !== undefined) poolGauges(registers, pool);
  return {
    statements: new client.Histogram({
      name: 'plantstore_db_statement_duration_seconds',
      help: 'PostgreSQL statements by name, waiting for a connection included, and outcome.',
      labelNames: ['statement', 'outcome'] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    batches: undefined,
    commits: undefined,
  };
}

function poolGauges(registers: client.Registry[], pool: () => PoolState | undefined): void {
  const gauge = (name: string, help: string, read: (state: PoolState) => number) =>
    new client.Gauge({
      name,
      help,
      registers,
      collect() {
        const state = pool();
        if (state !== undefined) this.set(read(state));
      },
    });
  gauge('plantstore_db_pool_connections', 'PostgreSQL connections open.', (s) => s.open);
  gauge('plantstore_db_pool_in_use', 'PostgreSQL connections running a statement.', (s) =>
    Math.max(0, s.open - s.idle),
  );
  gauge('plantstore_db_pool_waiting', 'Statements waiting for a connection.', (s) => s.waiting);
  gauge('plantstore_db_pool_max', 'Connections the pool may open.', (s) => s.max);
}

/**
 * Serves `GET /metrics` in Prometheus' text format from `collect`, and nothing else. Resolves
 * with the listener once it listens (port 0 takes a free port; the address says which).
 */
export async function serveMetrics(
  { host, port }: MetricsListen,
  collect: () => Promise<{ text: string; contentType: string }>,
  onError: (error: unknown) => void,
): Promise<{ server: Server; url: string }> {
  const server = createServer((request, response) => {
    if (request.url !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics here\n');
      return;
    }
    collect().then(
      ({ text, contentType }) => response.writeHead(200, { 'content-type': contentType }).end(text),
      (error: unknown) => {
        if (error instanceof NoWorkerYet) {
          response
            .writeHead(503, { 'content-type': 'text/plain', 'retry-after': '1' })
            .end(`${error.message}\n`);
          return;
        }
        onError(error);
        response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics failed\n');
      },
    );
  });
  // A scraper keeps its connection; it must not hold up shutdown.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return { server, url: `http://${shown}:${address.port}/metrics` };
}

/** `--metrics-port` as serve takes it: a listener, or (a --workers worker) the primary's. */
export type MetricsOption = MetricsListen | 'to-primary';

export interface RunningMetrics {
  metrics: Metrics;
  close(): Promise<void>;
}

/**
 * Starts measuring for one serving process: its own listener, or, in a worker, answering
 * the primary's aggregating listener (see cluster-metrics.ts).
 */
export async function startMetrics(
  option: MetricsOption,
  sources: MetricSources,
  log: {
    info(fields: object, message: string): void;
    error(fields: object, message: string): void;
  },
): Promise<RunningMetrics> {
  const registry = new client.Registry();
  const metrics = prometheusMetrics(registry, sources);
  if (option === 'to-primary') {
    answerPrimary(registry);
    return { metrics, close: async () => undefined };
  }
  const { server, url } = await serveMetrics(
    option,
    async () => ({ text: await registry.metrics(), contentType: registry.contentType }),
    (error) => log.error({ err: error }, 'metrics collection failed'),
  );
  log.info({ url }, `metrics at ${url}`);
  return { metrics, close: () => closeServer(server) };
}

/** The --workers primary's listener: every worker's metrics, summed or kept per worker. */
export async function serveClusterMetrics(
  listen: MetricsListen,
  log: {
    info(fields: object, message: string): void;
    error(fields: object, message: string): void;
  },
): Promise<Server> {
  const workers = new WorkerMetrics();
  const { server, url } = await serveMetrics(
    listen,
    async () => ({ text: await workers.metrics(), contentType: workers.contentType }),
    (error) => log.error({ err: error }, 'metrics collection from the workers failed'),
  );
  log.info({ url }, `metrics at ${url}`);
  return server;
}

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
