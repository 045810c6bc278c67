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
 * SQLSTATEs of a statement the server refused on its own merits, which ends no session and
 * leaves nothing behind on it: data exceptions (22: a value out of range, an exhausted
 * sequence), integrity (23: a key taken by a racing request), a serialization failure or a
 * deadlock's victim (40001, 40P01: rolled back whole) and a statement timeout (57014). An
 * allow-list, by code rather than severity (which comes in the server's language): after
 * anything else (0A000, a cached plan whose columns changed under it; 26000, a prepared
 * statement the server no longer has; a FATAL) the connection could fail the same way at every
 * later statement, and is dropped, as pool.query drops it after any error. Dropped, a client
 * racing its own Idempotency-Key cost the database a new backend (a fork, a login, every
 * statement prepared again) per race.
 */
const REFUSED_STATEMENT = /^(?:22|23)|^(?:40001|40P01|57014)$/;

const refusedStatement = (error: Error): boolean =>
  error instanceof pg.DatabaseError && REFUSED_STATEMENT.test(error.code ?? '');

/**
 * Gives a connection back to the pool after a refused statement, once the server is ready
 * for the next one (its ReadyForQuery follows the error, which pg answers at once) and only
 * outside a transaction; drops it should it fail meanwhile or the server not be ready within
 * `waitMs`. The statement's caller has its answer already.
 */
function giveBackWhenReady(
  client: pg.PoolClient,
  done: (release?: Error) => void,
  error: Error,
  waitMs: number,
): void {
  let given = false;
  const give = (sound: boolean) => {
    if (given) return;
    given = true;
    clearTimeout(late);
    client.removeListener('error', broken);
    client.removeListener('drain', ready);
    done(sound ? undefined : error);
  };
  const broken = () => give(false);
  const ready = () => give(client.getTransactionStatus() === 'I');
  const late = setTimeout(broken, waitMs);
  client.once('error', broken);
  client.once('drain', ready);
}

/**
 * pool.query, with the read timeout above: a connection of the pool runs the statement, and
 * is given back, or dropped by the pool if the statement failed, unless the server refused
 * it on its merits (REFUSED_STATEMENT). pg's own `query_timeout` kept the read timeout until
 * 2026-11-29: with it, each statement's rows lived on through the young generation's
 * collections and were promoted to the old one, which cost a 100-plant page 15% more
 * instructions in the store (bench/HISTORY.md); this does not.
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
      // Once: the connection given back, or, after an error, dropped by the pool and ended.
      const settle = (error: Error | undefined, result?: pg.QueryResult<R>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.removeListener('error', settle);
        if (error !== undefined && refusedStatement(error)) {
          giveBackWhenReady(client, done, error, readTimeoutMs);
        } else {
          done(error);
        }
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
