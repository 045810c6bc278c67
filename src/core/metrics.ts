/**
 * What the layers below the CLI report for `/metrics`. The CLI backs it with prom-client
 * when `--metrics-port` is given; otherwise nothing is measured and every call is a no-op,
 * so the hot path pays for metrics only when they are asked for.
 */
export interface Metrics {
  /** An answered request: its route template (`/plants/{id}`), method, status, seconds. */
  request(route: string, method: string, status: number, seconds: number): void;
  /**
   * A request refused by a rate limit, by the limit's policy name (`token`, `failed-auth`), or
   * `in-flight` for one refused for its token's requests in flight.
   */
  rateLimited(policy: string): void;
  /**
   * A database statement, by its name (`plants.get`), and how it ended: `ok`, `error`, or
   * `raced`, an error its caller expects when another request got there first (a keyed
   * create whose key another one inserted meanwhile).
   */
  statement(name: string, seconds: number, outcome: StatementOutcome): void;
  /** A SQLite group commit: the writes it carried, and seconds spent in COMMIT (the fsync). */
  groupCommit(writes: number, commitSeconds: number): void;
  /**
   * A webhook attempt: what became of its message (`delivered`, `retry`, `failed`, `gone`,
   * or `lease-lost`), seconds from the message's write to this attempt's end, and the
   * attempt's own seconds.
   */
  webhookAttempt(outcome: string, lagSeconds: number, seconds: number): void;
  /** Event streams and waiting long polls of GET /events open in this process, now. */
  eventStreams(open: number): void;
  /** Connections open in this process, now. */
  connections(open: number): void;
  /**
   * A connection closed at --max-connections: an idle or a stalled one closed to make room,
   * or a new one refused for want of it.
   */
  closedAtLimit(reason: 'idle' | 'stalled' | 'refused'): void;
}

export type StatementOutcome = 'ok' | 'error' | 'raced';

export const noMetrics: Metrics = {
  request: () => undefined,
  rateLimited: () => undefined,
  statement: () => undefined,
  groupCommit: () => undefined,
  webhookAttempt: () => undefined,
  eventStreams: () => undefined,
  connections: () => undefined,
  closedAtLimit: () => undefined,
};

/** Seconds since `start`, a `process.hrtime.bigint()`-style reading in nanoseconds. */
export const secondsSince = (start: bigint, end: bigint): number => Number(end - start) / 1e9;
