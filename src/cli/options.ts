import { isIP } from 'node:net';
import { InvalidArgumentError, Option } from 'commander';
import { formatRateLimit, parseRateLimit, type RateLimit } from '../core/rate-limit.js';
import { DEFAULT_SCOPES, parseScopes } from '../core/scopes.js';
import { parseDuration } from '../core/tokens.js';
import { isPostgresUrl, type StoreConfig } from '../store/open.js';

/** Where the database is when neither --db nor PLANTSTORE_DB says. */
export const DEFAULT_DB = './data/plantstore.db';

/** Wraps a parser so its message reaches the user as a usage error (exit 2). */
function argument<T>(parse: (text: string) => T): (text: string) => T {
  return (text) => {
    try {
      return parse(text);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message);
    }
  };
}

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
    argument(parseDuration),
  );

export const tokenIdArgument = argument((text) => {
  if (!/^[1-9]\d{0,14}$/.test(text)) throw new Error(`"${text}" is not a token id`);
  return Number(text);
});

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
