import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import type { CorsOrigins } from '../api/cors-origins.js';
import { DEFAULT_RATE_LIMITS, type RateLimit } from '../core/rate-limit.js';
import type { ProcessControl } from '../server/process-control.js';
import type { Durability } from '../store/store.js';
import {
  auditRetentionOption,
  corsOriginsOption,
  databaseUrlOption,
  type DatabaseOptions,
  dbOption,
  edgeTimeouts,
  headersTimeoutOption,
  keepAliveTimeoutOption,
  parsePort,
  parseTrustProxy,
  positiveInteger,
  requestTimeoutOption,
  sendTimeoutOption,
  shutdownGraceOption,
  rateLimitOption,
  storeConfig,
  type TimeoutOptions,
  USAGE,
  UsageError,
} from './options.js';
import { usageErrorsOf } from './usage-errors.js';
import { inFlightPerTokenOption, maxConnectionsOption } from './limit-options.js';
import { auditCommand } from './audit-command.js';
import {
  defaultMaxEventStreams,
  eventsRetentionOption,
  maxEventStreamsOption,
} from './event-options.js';
import { backupCommands } from './backup-commands.js';
import { databaseName, named, withDatabase } from './database.js';
import { eventsCommand } from './events-command.js';
import { plantsCommand } from './plants-command.js';
import { tokenCommand } from './token-commands.js';
import { webhooksCommand } from './webhooks-command.js';
import { type WebhookCommandOptions, webhookOptions } from './webhook-options.js';

interface ServeCommandOptions extends DatabaseOptions, TimeoutOptions, WebhookCommandOptions {
  host: string;
  port: number;
  durability: Durability;
  logLevel: string;
  poolSize?: number;
  workers: number;
  maxConnections: number;
  inFlightPerToken: number;
  corsOrigins?: CorsOrigins;
  /** false: off. */
  rateLimit: RateLimit | false;
  authFailureLimit: RateLimit | false;
  trustProxy: string | false;
  metricsPort?: number;
  metricsHost: string;
  auditRetention?: number;
  eventsRetention: number;
  maxEventStreams?: number;
}

/** The server runtime stops and exits through this: only the CLI touches the process. */
const processControl: ProcessControl = {
  onStopSignal(stop) {
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  },
  exit: (code) => process.exit(code),
};

/** The package's version: the one the served OpenAPI document declares too (a test holds them equal). */
const VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

function program(): Command {
  const root = new Command('plantstore')
    .description('The plant store HTTP API and its administration.')
    .version(VERSION, '-V, --version', 'print the version of plantstore');

  root
    .command('serve')
    .description('serve the API, creating and migrating the database if needed')
    .addOption(new Option('--host <host>', 'address to listen on').env('HOST').default('127.0.0.1'))
    .addOption(
      new Option('--port <port>', 'port to listen on (0: any free port)')
        .env('PORT')
        .default(8080)
        .argParser(parsePort),
    )
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .addOption(
      new Option('--pool-size <n>', 'PostgreSQL connections per process (default 10)')
        .env('PLANTSTORE_POOL_SIZE')
        .argParser(positiveInteger('connections', 1000)),
    )
    .addOption(maxConnectionsOption())
    .addOption(inFlightPerTokenOption())
    .addOption(requestTimeoutOption())
    .addOption(headersTimeoutOption())
    .addOption(keepAliveTimeoutOption())
    .addOption(sendTimeoutOption())
    .addOption(shutdownGraceOption())
    .addOption(corsOriginsOption())
    .addOption(
      new Option('--workers <n>', 'processes sharing the port (node:cluster)')
        .env('PLANTSTORE_WORKERS')
        .default(1)
        .argParser(positiveInteger('workers', 256)),
    )
    .addOption(
      new Option(
        '--durability <level>',
        'power: answer writes once fsynced; process: leave fsync to the OS (faster, may lose the last writes to a power cut)',
      )
        .env('PLANTSTORE_DURABILITY')
        .default('power')
        .choices(['power', 'process']),
    )
    .addOption(
      rateLimitOption(
        '--rate-limit <limit>',
        'PLANTSTORE_RATE_LIMIT',
        'requests per token',
        DEFAULT_RATE_LIMITS.perToken!,
      ),
    )
    .addOption(
      rateLimitOption(
        '--auth-failure-limit <limit>',
        'PLANTSTORE_AUTH_FAILURE_LIMIT',
        'failed authentications per client address, then 429',
        DEFAULT_RATE_LIMITS.authFailures!,
      ),
    )
    .addOption(
      new Option(
        '--trust-proxy <proxies>',
        'take the client address from X-Forwarded-For on connections from these proxies (addresses, CIDR ranges, loopback, linklocal, uniquelocal) or off',
      )
        .env('PLANTSTORE_TRUST_PROXY')
        .default(false, 'off')
        .argParser(parseTrustProxy),
    )
    .addOption(
      new Option(
        '--metrics-port <port>',
        'serve Prometheus metrics at GET /metrics on this port, a listener of its own (default: off)',
      )
        .env('PLANTSTORE_METRICS_PORT')
        .argParser(parsePort),
    )
    .addOption(
      new Option('--metrics-host <host>', 'address of the metrics listener')
        .env('PLANTSTORE_METRICS_HOST')
        .default('127.0.0.1'),
    )
    .addOption(
      new Option('--log-level <level>', 'pino log level')
        .env('LOG_LEVEL')
        .default('info')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    )
    .addOption(auditRetentionOption())
    .addOption(eventsRetentionOption())
    .addOption(maxEventStreamsOption())
    .addOption(webhookOptions.timeout())
    .addOption(webhookOptions.retrySchedule())
    .addOption(webhookOptions.allowNetworks())
    .addOption(webhookOptions.disableAfter())
    .addOption(webhookOptions.retention())
    .addOption(webhookOptions.maxEndpoints())
    .action(async (options: ServeCommandOptions, command: Command) => {
      const timeouts = edgeTimeouts(options);
      if (typeof timeouts === 'string') {
        process.stderr.write(`plantstore: ${timeouts}\n`);
        process.exitCode = USAGE;
        return;
      }
      const store = {
        ...storeConfig(options),
        durability: options.durability,
        ...(options.poolSize !== undefined && { poolSize: options.poolSize }),
      };
      if (options.workers > 1 && options.databaseUrl === undefined && options.db === ':memory:') {
        // Each worker would have a database of its own, and answers would depend on which.
        process.stderr.write('plantstore: --workers needs a shared database, not --db :memory:\n');
        process.exitCode = USAGE;
        return;
      }
      const metricsListen =
        options.metricsPort === undefined
          ? undefined
          : { host: options.metricsHost, port: options.metricsPort };
      if (options.workers > 1 && cluster.isPrimary) {
        const { runPrimary } = await import('../server/cluster.js');
        await runPrimary(
          {
            workers: options.workers,
            store,
            databaseName: databaseName(options, command),
            logLevel: options.logLevel,
            shutdownGraceMs: timeouts.shutdownGraceMs,
            ...(metricsListen && { metrics: metricsListen }),
          },
          processControl,
        );
        return;
      }
      // Loaded here so that token commands do not pay for the HTTP stack.
      const { serve } = await import('../server/serve.js');
      await serve(
        {
          host: options.host,
          port: options.port,
          store,
          databaseName: databaseName(options, command),
          logLevel: options.logLevel,
          maxConnections: options.maxConnections,
          inFlightPerToken: options.inFlightPerToken,
          ...timeouts,
          ...(options.corsOrigins !== undefined && { corsOrigins: options.corsOrigins }),
          rateLimits: {
            perToken: options.rateLimit || null,
            authFailures: options.authFailureLimit || null,
          },
          trustProxy: options.trustProxy,
          ...(options.auditRetention !== undefined && { auditRetentionMs: options.auditRetention }),
          eventsRetentionMs: options.eventsRetention,
          maxEventStreams:
            options.maxEventStreams ?? defaultMaxEventStreams(options.maxConnections),
          // A --workers worker reports to the primary, which alone listens.
          ...(metricsListen && { metrics: cluster.isWorker ? 'to-primary' : metricsListen }),
          webhooks: {
            timeoutMs: options.webhookTimeout,
            retryScheduleMs: options.webhookRetrySchedule,
            allowNetworks: options.webhookAllowNetworks,
            disableAfterMs: options.webhookDisableAfter,
            retentionMs: options.webhookRetention,
            maxEndpoints: options.webhookMaxEndpoints,
          },
        },
        processControl,
      );
    });

  root
    .command('migrate')
    .description('create the database or bring its schema up to date, then exit')
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .action(async (options: DatabaseOptions, command: Command) => {
      await withDatabase(options, command, { create: true }, async (database) => {
        const { version, applied } = database.store.migration;
        process.stderr.write(
          applied.length === 0
            ? `schema already at version ${version} in ${named(database)}\n`
            : `applied ${applied.join(', ')}; schema at version ${version} in ${named(database)}\n`,
        );
      });
    });

  root.addCommand(tokenCommand());
  root.addCommand(auditCommand());
  for (const command of backupCommands()) root.addCommand(command);
  root.addCommand(plantsCommand());
  root.addCommand(eventsCommand());
  root.addCommand(webhooksCommand());
  usageErrorsOf(root);
  return root;
}

try {
  await program().parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    process.exitCode = error.exitCode === 0 ? 0 : USAGE;
  } else if (error instanceof UsageError) {
    process.stderr.write(`plantstore: ${error.message}\n`);
    process.exitCode = USAGE;
  } else {
    process.stderr.write(`plantstore: ${(error as Error).message}\n`);
    process.exitCode = 1;
    // A cluster worker's channel to its primary would keep it alive: leave explicitly.
    if (cluster.isWorker) process.exit(1);
  }
}
