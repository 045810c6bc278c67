import { isIP } from 'node:net';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { formatRateLimit, parseRateLimit, type RateLimit } from '../core/rate-limit.js';
import { DEFAULT_SCOPES, parseScopes } from '../core/scopes.js';
import { parseDuration } from '../core/tokens.js';
import { INT64_RANGE, int64Spelling, parseInt64 } from '../core/int64.js';
import { parseCorsOrigins } from '../api/cors-origins.js';
import {
  HEADERS_TIMEOUT_MS,
  KEEP_ALIVE_TIMEOUT_MS,
  SEND_TIMEOUT_MS,
  REQUEST_TIMEOUT_MS,
  SHUTDOWN_GRACE_MS,
  TIMEOUT_MAX_MS,
  TIMEOUT_MIN_MS,
} from '../api/limits.js';
import { isPostgresUrl, type StoreConfig } from '../store/open.js';
import { forTerminal } from './terminal-text.js';

/** Exit codes: 0 done, 1 failed, 2 the command line was wrong. */
export const USAGE = 2;

/** Where the database is when neither --db nor PLANTSTORE_DB says. */
export const DEFAULT_DB = './data/plantstore.db';

/** Wraps a parser so its message reaches the user as a usage error (exit 2). */
export function argument<T>(parse: (text: string) => T): (text: string) => T {
  return (text) => {
    try {
      return parse(text);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message);
    }
  };
}

/**
 * A mistake on the command line that one line says: `plantstore: <message>` and exit code 2,
 * without commander's usage after it. Thrown by a command's work, or by an argument parser
 * (which commander then passes on to main.ts as it is).
 */
export class UsageError extends Error {}

/**
 * An int64 id argument or option value (`name`: "the plant id"), refused in the server's
 * words for an id in a path: "the plant id is written without leading zeros: 7, not 007".
 */
export const int64Argument =
  (name: string) =>
  (text: string): bigint => {
    const id = parseInt64(text);
    if (id !== undefined) return id;
    const problem =
      int64Spelling(text) ??
      `must be a decimal integer from ${INT64_RANGE}, not "${forTerminal(text)}"`;
    throw new UsageError(`${name} ${problem}`);
  };

export const parsePort = argument((text) => {
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) {
    throw new Error(`"${text}" is not a port number (0 to 65535)`);
  }
  return Number(text);
});

export const dbOption = () =>
  new Option('--db <file>', 'SQLite database file').env('PLANTSTORE_DB').default(DEFAULT_DB);

export const databaseUrlOption = () =>
  new Option('--database-url <url>', 'use PostgreSQL at this postgres:// URL instead of SQLite')
    .env('DATABASE_URL')
    .argParser(
      argument((text) => {
        // Not echoed: a URL may carry a password, and this message goes to a terminal or a log.
        if (!isPostgresUrl(text)) throw new Error('the database URL must start with postgres://');
        return text;
      }),
    );

/** The options every command that opens the database takes. */
export interface DatabaseOptions {
  db: string;
  databaseUrl?: string;
}

export const storeConfig = (options: DatabaseOptions): StoreConfig => ({
  db: options.db,
  ...(options.databaseUrl !== undefined && { databaseUrl: options.databaseUrl }),
});

export const positiveInteger = (what: string, max: number) =>
  argument((text) => {
    if (!/^[1-9]\d{0,6}$/.test(text) || Number(text) > max) {
      throw new Error(`"${text}" is not a number of ${what} (1 to ${max})`);
    }
    return Number(text);
  });

export const scopesOption = () =>
  new Option('--scopes <list>', 'comma-separated scopes')
    .default([...DEFAULT_SCOPES], DEFAULT_SCOPES.join(','))
    .argParser(argument(parseScopes));

export const expiresOption = () =>
  new Option('--expires-in <duration>', 'lifetime such as 90s, 15m, 12h, 30d, 8w').argParser(
    argument((text) => {
      // parseDuration's "not a duration" would be wrong: 0s is one, just too short to use.
      if (/^0+[smhdw]$/.test(text)) throw new Error('--expires-in must be at least 1s');
      return parseDuration(text);
    }),
  );

export const tokenIdArgument = argument((text) => {
  if (!/^[1-9]\d{0,14}$/.test(text)) throw new Error(`"${text}" is not a token id`);
  return Number(text);
});

/** A bounded duration option such as `--request-timeout 30s`; milliseconds once parsed. */
function durationOption(flags: string, description: string, env: string) {
  return new Option(flags, description).env(env).argParser(
    argument((text) => {
      const ms = parseDuration(text);
      if (ms < TIMEOUT_MIN_MS || ms > TIMEOUT_MAX_MS) {
        const range = `${formatMs(TIMEOUT_MIN_MS)} to ${formatMs(TIMEOUT_MAX_MS)}`;
        throw new Error(`"${text}" is out of range (${range})`);
      }
      return ms;
    }),
  );
}

/** `90000` -> `90s`, `3600000` -> `1h`: in the largest unit that divides it. */
export function formatMs(ms: number): string {
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

export const requestTimeoutOption = () =>
  durationOption(
    '--request-timeout <duration>',
    'a whole request, headers and body, must arrive within this (408 beyond)',
    'PLANTSTORE_REQUEST_TIMEOUT',
  ).default(REQUEST_TIMEOUT_MS, formatMs(REQUEST_TIMEOUT_MS));

export const headersTimeoutOption = () =>
  durationOption(
    '--headers-timeout <duration>',
    `the header section must arrive within this (408 beyond); at most the request timeout (default: ${formatMs(HEADERS_TIMEOUT_MS)}, or the request timeout if shorter)`,
    'PLANTSTORE_HEADERS_TIMEOUT',
  );

export const keepAliveTimeoutOption = () =>
  durationOption(
    '--keep-alive-timeout <duration>',
    'an idle keep-alive connection is closed after this',
    'PLANTSTORE_KEEP_ALIVE_TIMEOUT',
  ).default(KEEP_ALIVE_TIMEOUT_MS, formatMs(KEEP_ALIVE_TIMEOUT_MS));

export const sendTimeoutOption = () =>
  durationOption(
    '--send-timeout <duration>',
    'an answer the client takes nothing of for this long closes its connection',
    'PLANTSTORE_SEND_TIMEOUT',
  ).default(SEND_TIMEOUT_MS, formatMs(SEND_TIMEOUT_MS));

export const shutdownGraceOption = () =>
  durationOption(
    '--shutdown-grace <duration>',
    'on SIGTERM/SIGINT, requests still running after this are cut off',
    'PLANTSTORE_SHUTDOWN_GRACE',
  ).default(SHUTDOWN_GRACE_MS, formatMs(SHUTDOWN_GRACE_MS));

/** The timeout options of `serve` as commander parses them. */
export interface TimeoutOptions {
  requestTimeout: number;
  headersTimeout?: number;
  keepAliveTimeout: number;
  sendTimeout: number;
  shutdownGrace: number;
}

export interface Timeouts {
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  sendTimeoutMs: number;
  shutdownGraceMs: number;
}

/** The timeouts to serve with, or what is wrong with them together. */
export function edgeTimeouts(options: TimeoutOptions): Timeouts | string {
  const { requestTimeout, headersTimeout, keepAliveTimeout, sendTimeout, shutdownGrace } = options;
  if (headersTimeout !== undefined && headersTimeout > requestTimeout) {
    return (
      `--headers-timeout (${formatMs(headersTimeout)}) cannot be longer than ` +
      `--request-timeout (${formatMs(requestTimeout)}): the headers are part of the request`
    );
  }
  return {
    requestTimeoutMs: requestTimeout,
    headersTimeoutMs: headersTimeout ?? Math.min(HEADERS_TIMEOUT_MS, requestTimeout),
    keepAliveTimeoutMs: keepAliveTimeout,
    sendTimeoutMs: sendTimeout,
    shutdownGraceMs: shutdownGrace,
  };
}

export const corsOriginsOption = () =>
  new Option(
    '--cors-origins <list>',
    'origins whose web pages may call the API, comma-separated (https://app.example), or * for any; unset: CORS off',
  )
    .env('PLANTSTORE_CORS_ORIGINS')
    .argParser(argument(parseCorsOrigins));
/**
 * `--rate-limit` and `--auth-failure-limit`: `requests/window`, or `off` as false (commander
 * would turn a parsed null into an empty string).
 */
export const rateLimitOption = (flags: string, env: string, what: string, fallback: RateLimit) =>
  new Option(flags, `${what}, as requests/window (100/60s, 5000/1h) or off`)
    .env(env)
    .default(fallback, formatRateLimit(fallback))
    .argParser(argument((text): RateLimit | false => parseRateLimit(text) ?? false));

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * `--trust-proxy`: `off`, or the proxies whose X-Forwarded-For to believe, comma-separated:
 * addresses, CIDR ranges (`10.0.0.0/8`, `fd00::/8`), or loopback, linklocal, uniquelocal.
 */
export const parseTrustProxy = argument((text): string | false => {
  if (text === 'off') return false;
  const items = text.split(',').map((item) => item.trim());
  for (const item of items) {
    const [address = '', prefix, ...rest] = item.split('/');
    const family = isIP(address);
    const bits = family === 4 ? 32 : 128;
    const validPrefix =
      prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
    if (!PROXY_NAMES.has(item) && (family === 0 || !validPrefix || rest.length > 0)) {
      throw new Error(
        `"${item}" is not a proxy address; use addresses, CIDR ranges (10.0.0.0/8), loopback, linklocal or uniquelocal`,
      );
    }
  }
  return items.join(',');
});

export const DAY_MS = 86_400_000;

/** `--audit-retention`: off unless given; at least a day, so that a typo cannot empty the trail. */
export const auditRetentionOption = () =>
  new Option(
    '--audit-retention <duration>',
    'delete audit entries older than this (90d, 52w; at least 1d), at start and once a minute; ' +
      'unset: every entry is kept',
  )
    .env('PLANTSTORE_AUDIT_RETENTION')
    .argParser(
      argument((text) => {
        const ms = parseDuration(text);
        if (ms < DAY_MS) throw new Error(`"${text}" is shorter than the least retention, 1d`);
        return ms;
      }),
    );

/**
 * Refuses an option of `command` given twice, or with its `--no-` form, instead of keeping the
 * last silently: `update --no-tag --tag shade` or `create --tag a --tag b` is a slip to point
 * out, not a choice to guess. Call once its options are defined.
 */
export function eachOptionOnce(command: Command): Command {
  const seen = new Map<string, string>();
  for (const option of command.options) {
    const flag = option.long ?? option.name();
    command.on(`option:${option.name()}`, () => {
      const before = seen.get(option.attributeName());
      if (before !== undefined) {
        const what =
          before === flag ? `${flag} is given twice` : `${before} and ${flag} are given together`;
        command.error(`error: ${what}: give one`, { exitCode: 2 });
      }
      seen.set(option.attributeName(), flag);
    });
  }
  return command;
}
