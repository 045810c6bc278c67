// How statements run on PostgreSQL: one autocommit statement each, on a connection of the
// pool, with "cannot reach the database" turned into StoreUnavailableError.

import pg from 'pg';
import { INT8_AS_TEXT } from './int8.js';
import {
  type Metrics,
  noMetrics,
  secondsSince,
  type StatementOutcome,
} from '../../core/metrics.js';
import { StoreUnavailableError } from '../store.js';
import { STATEMENT_TIMEOUT_MS } from './timeouts.js';

export type Query = <R extends pg.QueryResultRow>(
  name: string,
  text: string,
  values: unknown[],
  options?: QueryOptions,
) => Promise<pg.QueryResult<R>>;

export interface QueryOptions {
  /**
   * Planned anew with its values each time, not prepared. A prepared statement's plan is
   * made once per connection, after its first five runs, for the tables as they were then,
   * and kept until the table is analysed (never, with autovacuum off): on a store that
   * started empty, a statement whose plan depends on the table's size keeps a scan of all of
   * it. Such statements, and those whose best plan depends on their values (webhooks.ts,
   * deliveries), are planned each time; test/store/query-plans.test.ts finds them.
   */
  planEachTime?: boolean;
  /** An error the caller expects now and then (see Metrics.statement's `raced`). */
  raced?: (error: unknown) => boolean;
  /**
   * int8 columns as their text (decimal digits), not bigints: for rows written straight
   * into JSON, which need no BigInt made and printed again for each id (a 100-plant page,
   * 7% fewer instructions in the store's read: bench/HISTORY.md).
   */
  int8AsText?: boolean;
}

function config(name: string, text: string, values: unknown[], options?: QueryOptions) {
  const query = options?.planEachTime === true ? { text, values } : { name, text, values };
  return options?.int8AsText === true ? { ...query, types: INT8_AS_TEXT } : query;
}

// SQLSTATE classes and codes that say "not now" rather than "not this": connection
// exceptions, serialization failures and deadlocks, insufficient resources, operator
// intervention, system errors; a read-only server (a failover in progress), refused
// credentials (a rotation in progress) and a missing database.
const UNAVAILABLE_CLASSES = new Set(['08', '28', '3D', '40', '53', '57', '58']);
const UNAVAILABLE_CODES = new Set(['25006']);

// What pg itself throws when the connection, not the statement, failed.
const CONNECTION_TROUBLE = /connection|terminated|timeout|not queryable/i;

/**
 * Whether a failed statement lost a race with another transaction (a deadlock's victim, a
 * serialization failure): it was rolled back whole, and the same statement may well succeed
 * at once. `error` as thrown by a Query (in a StoreUnavailableError) or by pg.
 */
export function lostRace(error: unknown): boolean {
  const cause = error instanceof StoreUnavailableError ? error.cause : error;
  return cause instanceof pg.DatabaseError && (cause.code === '40P01' || cause.code === '40001');
}

/** Whether a failed database call means "try again later" (503) rather than a bug (500). */
export function isUnavailable(error: unknown): boolean {
  if (error instanceof pg.DatabaseError) {
    const code = error.code ?? '';
    return UNAVAILABLE_CLASSES.has(code.slice(0, 2)) || UNAVAILABLE_CODES.has(code);
  }
  if (!(error instanceof Error)) return false;
  // Refused, reset, broken pipe, unreachable: Node's system errors carry a syscall.
  return 'syscall' in error || CONNECTION_TROUBLE.test(error.message);
}

async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw isUnavailable(error) ? new StoreUnavailableError(error) : error;
  }
}

/**
 * How long a statement may go unanswered on the wire before its connection is given up: the
 * server's statement timeout and a second for the answer to come. A connection whose peer
 * vanished without a word (a cut cable, a dead proxy) is noticed by this, not by TCP minutes
 * later.
 */
export const READ_TIMEOUT_MS = STATEMENT_TIMEOUT_MS + 1_000;

/**
 * Whether a connection may serve again after `error`: yes when the server refused the
 * statement itself (severity ERROR: a key taken by a racing request, a deadlock's victim, a
 * statement timeout), which leaves the connection idle and sound, its prepared statements
 * with it (pg forgets a name whose Parse failed); no after anything else (FATAL, a read
 * timeout, a broken socket). pool.query drops the connection after any error: a client that
 * races its own Idempotency-Key then costs the database a new backend (a fork, a login, every
 * statement prepared again) per race.
 */
// pg gives the severity as the server writes it, in the server's language (lc_messages): a
// server that writes another one has its connections dropped after every error, as before.
const connectionSound = (error: Error): boolean =>
  error instanceof pg.DatabaseError && error.severity === 'ERROR';

/**
 * pool.query, with the read timeout above: a connection of the pool runs the statement, and
 * is given back, or dropped by the pool if it is unsound (connectionSound). pg's
 * own `query_timeout` did this until 2026-11-29: with it, each statement's rows lived on
 * through the young generation's collections and were promoted to the old one, which cost a
 * 100-plant page 15% more instructions in the store (bench/HISTORY.md); this does not.
 */
function run<R extends pg.QueryResultRow>(
  pool: pg.Pool,
  statement: pg.QueryConfig,
  readTimeoutMs: number,
): Promise<pg.QueryResult<R>> {
  // Callbacks, as pool.query is written, not the promises pg makes: behind those, the rows of
  // every statement outlived the young generation's collections (bench/HISTORY.md).
  return new Promise((resolve, reject) => {
    pool.connect((connectError, client, done) => {
      if (connectError instanceof Error || client === undefined) {
        reject(connectError ?? new Error('no connection'));
        return;
      }
      let settled = false;
      // Once: the connection given back, or, unsound, dropped by the pool and ended.
      const settle = (error: Error | undefined, result?: pg.QueryResult<R>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.removeListener('error', settle);
        done(error === undefined || connectionSound(error) ? undefined : error);
        if (error === undefined) resolve(result!);
        else reject(error);
      };
      // An error of the connection itself, as pool.query listens for one.
      client.once('error', settle);
      // The message pg's own timeout gives: isUnavailable reads it as "not now".
      const timer = setTimeout(() => settle(new Error('Query read timeout')), readTimeoutMs);
      try {
        client.query<R>(statement, (error, result) => settle(error ?? undefined, result));
      } catch (error) {
        // As pool.query: a throw here would otherwise escape into the pool's own callbacks.
        settle(error instanceof Error ? error : new Error(String(error)));
      }
    });
  });
}

/**
 * Runs each statement on a connection of the pool, as a prepared statement of that name,
 * timing it (waiting for a connection included) by that name.
 */
export function poolQuery(
  pool: pg.Pool,
  metrics: Metrics = noMetrics,
  readTimeoutMs = READ_TIMEOUT_MS,
): Query {
  if (metrics === noMetrics) {
    return <R extends pg.QueryResultRow>(
      name: string,
      text: string,
      values: unknown[],
      options?: QueryOptions,
    ) => guard(() => run<R>(pool, config(name, text, values, options), readTimeoutMs));
  }
  return async <R extends pg.QueryResultRow>(
    name: string,
    text: string,
    values: unknown[],
    options?: QueryOptions,
  ) => {
    const start = process.hrtime.bigint();
    let outcome: StatementOutcome = 'error';
    try {
      const result = await guard(() =>
        run<R>(pool, config(name, text, values, options), readTimeoutMs),
      );
      outcome = 'ok';
      return result;
    } catch (error) {
      if (options?.raced?.(error) === true) outcome = 'raced';
      throw error;
    } finally {
      metrics.statement(name, secondsSince(start, process.hrtime.bigint()), outcome);
    }
  };
}
