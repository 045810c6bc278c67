// The changes feed on PostgreSQL (GET /events): the audit trail read as a log of events, up
// to a watermark below which every seq is final, so that no reader passes an entry still
// committing (the argument: the migration 0011_changes_feed.sql). The writes pay nothing for
// it; after its commits a writing process NOTIFYs, at most every 20 ms, so that the streams of
// every process look again.
import type { Log } from '../../core/log.js';
import type { EventLog } from '../event-log.js';
import { EVENT_COLUMNS, type EventRow, toChangeEvent } from '../event-rows.js';
import { epochMillis, type MessageSignal } from '../webhook-rows.js';
import type { Query } from './query.js';

/** The channel a writing process NOTIFYs on after its commits: streams everywhere look again. */
export const EVENTS_CHANNEL = 'plantstore_events';

/** A writing process NOTIFYs at most this often (one NOTIFY for every write in between). */
export const NOTIFY_EVERY_MS = 20;

/** How long a look at the watermark waits between two looks at the writes it waits for. */
const LOCK_POLL_MS = [1, 2, 5, 10, 20];

// The last seq handed out, then (the correlated ARRAY runs for the row `drawn` gives, so after
// it) the writes holding the lock every write of audit_log takes before it draws one.
const LOOK = `WITH drawn AS MATERIALIZED (
    SELECT coalesce(pg_sequence_last_value(
      pg_get_serial_sequence('audit_log', 'seq')::regclass), 0) AS last)
  SELECT d.last, ARRAY(
    SELECT l.virtualtransaction FROM pg_locks l
    WHERE l.locktype = 'relation' AND l.relation = 'audit_log'::regclass
      AND l.mode = 'RowExclusiveLock' AND l.granted AND d.last IS NOT NULL) AS writers
  FROM drawn d`;

// How many of those writes still hold it: none, and every seq up to `last` is final.
export const STILL_WRITING = `SELECT count(*) AS n FROM pg_locks
  WHERE locktype = 'relation' AND relation = 'audit_log'::regclass
    AND mode = 'RowExclusiveLock' AND granted AND virtualtransaction = ANY($1::text[])`;

// An event's columns as read here and by the webhooks' fan-out: its time as epoch milliseconds
// (int8, read with epochMillis), not a timestamptz, which pg parses field by field
// (postgres-date) at about a microsecond a row. A read of 150 events: the server's CPU 372 to
// 460 µs → 282 to 317, the database's the same (170 to 200 µs; extract(), numeric, costs it
// 40 µs more; see bench/HISTORY.md). Cut to the millisecond first, as pg's parser cuts a
// Date's (before 1970 too), so a time read here is the audit trail's; every `at` plantstore
// writes is whole milliseconds anyway, which date_part's float8 holds to well under one, so
// the rounding is exact. int8, not float8: a float's text depends on the session's
// extra_float_digits.
export const PG_EVENT_COLUMNS = EVENT_COLUMNS.replace(
  /\bat\b/,
  "round(date_part('epoch', date_trunc('milliseconds', at)) * 1000)::int8 AS at",
);

// A page and the horizon in one snapshot: a prune of the trail deletes its entries and moves
// the horizon together, so a page never lacks an event without the horizon saying so. The
// horizon's one row read with LIMIT 1: a table never analysed is planned as 2,200 rows, and
// the page's cost counted 2,200 times passed jit_above_cost, so that PostgreSQL compiled the
// statement at each run: 3.5 ms of its CPU for a read of 0.1 ms, 40 times a second while a
// stream followed the writes (bench/HISTORY.md).
export const READ = `SELECT h.position AS horizon, ${EVENT_COLUMNS.split(', ')
  .map((column) => `a.${column}`)
  .join(', ')}
  FROM (SELECT position FROM event_horizon LIMIT 1) h LEFT JOIN LATERAL (
    SELECT ${PG_EVENT_COLUMNS} FROM audit_log
    WHERE seq > coalesce($1::bigint, h.position) AND seq <= $3 ORDER BY seq LIMIT $2) a ON true`;

const HORIZON = 'SELECT position FROM event_horizon';

// The oldest entries above the horizon and up to the watermark, up to the first one young
// enough to keep: the horizon moves over them (a prefix), and they stay in the trail.
const PRUNE = `WITH oldest AS MATERIALIZED (
    SELECT seq, at FROM audit_log
    WHERE seq > (SELECT position FROM event_horizon) AND seq <= $3 ORDER BY seq LIMIT $2),
  passed AS (
    SELECT max(seq) AS seq, count(*) AS n FROM oldest
    WHERE seq < coalesce((SELECT min(seq) FROM oldest WHERE at >= $1), 9223372036854775807)),
  moved AS (
    UPDATE event_horizon SET position = greatest(position, (SELECT seq FROM passed))
    WHERE (SELECT n FROM passed) > 0)
  SELECT n FROM passed`;

interface ReadRow extends Omit<EventRow, 'seq'> {
  horizon: bigint;
  seq: bigint | null;
}

/** The log on PostgreSQL, with the watermark the webhooks' fan-out reads up to. */
export interface PostgresEventLog extends EventLog {
  /**
   * The watermark after a look started now (see `settle`): every seq up to it is final; and
   * how long of the call was spent waiting for writes still committing, between the looks'
   * statements (what the caller did not make the database do).
   */
  readable(): Promise<{ position: bigint; waitedMs: number }>;
}

/**
 * The log on PostgreSQL. `written` is fired by this process's plant writes after their
 * commit; `remote` by the NOTIFY of any process's (`listen` starts the LISTEN connection on
 * first use).
 */
export function postgresEventLog(
  query: Query,
  written: MessageSignal,
  remote: MessageSignal,
  listen: () => void,
  log: Log,
): PostgresEventLog {
  const watermark = new Watermark(query);
  const notifier = new Notifier(query, log);
  written.on(() => notifier.written());
  return {
    async read(after, limit) {
      const readable = watermark.value;
      const { rows } = await query<ReadRow>('events.read', READ, [
        after === undefined ? null : after.toString(),
        limit,
        readable.toString(),
      ]);
      const events = rows.flatMap((row) =>
        row.seq === null ? [] : [toChangeEvent(row as EventRow, epochMillis)],
      );
      // In order as read; sorted all the same, as a join's output order is not promised.
      events.sort((a, b) => (a.position < b.position ? -1 : 1));
      const horizon = rows[0]!.horizon;
      return { events, horizon, head: readable > horizon ? readable : horizon };
    },
    async head() {
      const { rows } = await query<{ position: bigint }>('events.horizon', HORIZON, []);
      const horizon = rows[0]!.position;
      return watermark.value > horizon ? watermark.value : horizon;
    },
    async prune(before, batch) {
      const { rows } = await query<{ n: bigint | null }>('events.prune', PRUNE, [
        before,
        batch,
        watermark.value.toString(),
      ]);
      return Number(rows[0]?.n ?? 0);
    },
    settle: () => watermark.advance(),
    async readable() {
      const asked = performance.now();
      const spent = watermark.statementMs;
      await watermark.advance();
      const looking = watermark.statementMs - spent;
      return {
        position: watermark.value,
        waitedMs: Math.max(0, performance.now() - asked - looking),
      };
    },
    onAppended(listener) {
      listen();
      // Positions are final only under the watermark: nothing is handed over, readers read.
      const heard = () => listener();
      const off = [written.on(heard), remote.on(heard)];
      return () => off.forEach((stop) => stop());
    },
  };
}

/**
 * The highest seq below which every seq is final, as this process last found it. One look at
 * a time; the calls during a look share the next one, which starts after it (so a call's look
 * starts after the call).
 */
class Watermark {
  value = 0n;
  /** The time the looks' statements took, in all (ms). */
  statementMs = 0;
  private running: Promise<void> | undefined;
  private next: Promise<void> | undefined;

  constructor(private readonly query: Query) {}

  advance(): Promise<void> {
    if (this.running === undefined) return this.run();
    // After the look that runs, failed or not: the calls that share the next one get its own
    // answer. Chained on success only, one failed look (a pool wait timed out) left `next`
    // rejected for good, and every later call during a look failed with it.
    const after = () => {
      this.next = undefined;
      return this.run();
    };
    this.next ??= this.running.then(after, after);
    return this.next;
  }

  private run(): Promise<void> {
    const running = this.look().finally(() => {
      if (this.running === running) this.running = undefined;
    });
    this.running = running;
    return running;
  }

  private async look(): Promise<void> {
    const { rows } = await this.timed(() =>
      this.query<{ last: bigint; writers: string[] }>('events.look', LOOK, []),
    );
    const { last, writers } = rows[0]!;
    for (let i = 0; writers.length > 0; i++) {
      const { rows: still } = await this.timed(() =>
        this.query<{ n: bigint }>('events.stillWriting', STILL_WRITING, [writers]),
      );
      if (still[0]!.n === 0n) break;
      await sleep(LOCK_POLL_MS[Math.min(i, LOCK_POLL_MS.length - 1)]!);
    }
    if (last > this.value) this.value = last;
  }

  private async timed<T>(statement: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await statement();
    } finally {
      this.statementMs += performance.now() - started;
    }
  }
}

/** NOTIFYs once after a burst of commits: at most every NOTIFY_EVERY_MS. */
class Notifier {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly query: Query,
    private readonly log: Log,
  ) {}

  written(): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.query('events.notify', `SELECT pg_notify('${EVENTS_CHANNEL}', '')`, []).catch(
        (error: unknown) => {
          // The streams of other processes find the events at their next look (every second).
          this.log.warn({ err: error }, 'telling other processes of new events failed');
        },
      );
    }, NOTIFY_EVERY_MS);
    this.timer.unref();
  }
}

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });
