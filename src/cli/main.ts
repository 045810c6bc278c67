import cluster from 'node:cluster';
import { Command, CommanderError, Option } from 'commander';
import type { CorsOrigins } from '../api/cors-origins.js';
import { DEFAULT_RATE_LIMITS, type RateLimit } from '../core/rate-limit.js';
import { MAX_CONNECTIONS } from '../api/limits.js';
import { openStore } from '../store/open.js';
import type { Durability } from '../store/store.js';
import {
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
} from './options.js';
import { auditCommand } from './audit-command.js';
import { tokenCommand } from './token-commands.js';
import { type WebhookCommandOptions, webhookOptions } from './webhook-options.js';

interface ServeCommandOptions extends DatabaseOptions, TimeoutOptions, WebhookCommandOptions {
  host: string;
  port: number;
  durability: Durability;
  logLevel: string;
  poolSize?: number;
  workers: number;
  maxConnections: number;
  corsOrigins?: CorsOrigins;
  /** false: off. */
  rateLimit: RateLimit | false;
  authFailureLimit: RateLimit | false;
  trustProxy: string | false;
}

/** Exit codes: 0 done, 1 failed, 2 the command line was wrong. */
const USAGE = 2;

function program(): Command {
  const root = new Command('plantstore')
    .description('The plant store HTTP API and its administration.')
    .showHelpAfterError()
    .exitOverride();

  const serve = root
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
    .addOption(
      new Option('--max-connections <n>', 'open connections per process; more are closed at once')
        .env('PLANTSTORE_MAX_CONNECTIONS')
        .default(MAX_CONNECTIONS)
        .argParser(positiveInteger('connections', 1_000_000)),
    )
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
      new Option('--log-level <level>', 'pino log level')
        .env('LOG_LEVEL')
        .default('info')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    );
  for (const option of webhookOptions()) serve.addOption(option);
  serve.action(async (options: ServeCommandOptions) => {
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
    if (options.workers > 1 && cluster.isPrimary) {
      const { runPrimary } = await import('./cluster.js');
      await runPrimary({
        workers: options.workers,
        store,
        logLevel: options.logLevel,
        shutdownGraceMs: timeouts.shutdownGraceMs,
      });
      return;
    }
    // Loaded here so that token commands do not pay for the HTTP stack.
    const { serve } = await import('./serve.js');
    await serve({
      host: options.host,
      port: options.port,
      store,
      logLevel: options.logLevel,
      maxConnections: options.maxConnections,
      ...timeouts,
      ...(options.corsOrigins !== undefined && { corsOrigins: options.corsOrigins }),
      rateLimits: {
        perToken: options.rateLimit || null,
        authFailures: options.authFailureLimit || null,
      },
      trustProxy: options.trustProxy,
      webhooks: {
        timeoutMs: options.webhookTimeout,
        retryScheduleMs: options.webhookRetrySchedule,
        allowNetworks: options.webhookAllowNetworks,
        disableAfterMs: options.webhookDisableAfter,
        retentionMs: options.webhookRetention,
      },
    });
  });

  root
    .command('migrate')
    .description('create the database or bring its schema up to date, then exit')
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .action(async (options: DatabaseOptions) => {
      const store = await openStore(storeConfig(options));
      await store.close();
      const { version, applied } = store.migration;
      process.stderr.write(
        applied.length === 0
          ? `schema already at version ${version}\n`
          : `applied ${applied.join(', ')}; schema at version ${version}\n`,
      );
    });

  root.addCommand(tokenCommand());
  root.addCommand(auditCommand());
  // Subcommands inherit neither exitOverride nor help-after-error; set them on each.
  const all = (command: Command): Command[] => [command, ...command.commands.flatMap(all)];
  for (const command of all(root)) command.exitOverride().showHelpAfterError();
  return root;
}

try {
  await program().parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    process.exitCode = error.exitCode === 0 ? 0 : USAGE;
  } else {
    process.stderr.write(`plantstore: ${(error as Error).message}\n`);
    process.exitCode = 1;
    // A cluster worker's channel to its primary would keep it alive: leave explicitly.
    if (cluster.isWorker) process.exit(1);
  }
}
