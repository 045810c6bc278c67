import type Database from 'better-sqlite3';
import { type Log, silentLog } from '../../core/log.js';
import { type Metrics, noMetrics, secondsSince } from '../../core/metrics.js';

interface PendingWrite {
  write: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Writes one transaction holds at most, so one batch cannot stall the event loop. */
const MAX_BATCH = 1000;

/**
 * Group commit, as databases do it: the writes that arrive in the same turn of the event
 * loop share one transaction, so one fsync makes all of them durable. Each write runs in
 * a savepoint of its own and succeeds or fails alone; none is settled before the COMMIT
 * of its batch has returned (and, with synchronous=FULL, the WAL is on disk).
 */
export class GroupCommit {
  private queue: PendingWrite[] = [];
  private scheduled = false;
  /** Transactions committed so far; for metrics and tests. */
  commits = 0;
  private readonly begin: Database.Statement;
  private readonly commit: Database.Statement;
  private readonly savepoint: Database.Statement;
  private readonly release: Database.Statement;
  private readonly rollbackTo: Database.Statement;

  constructor(
    private readonly db: Database.Database,
    private readonly log: Log = silentLog,
    private readonly metrics: Metrics = noMetrics,
  ) {
    this.begin = db.prepare('BEGIN IMMEDIATE');
    this.commit = db.prepare('COMMIT');
    this.savepoint = db.prepare('SAVEPOINT write');
    this.release = db.prepare('RELEASE write');
    this.rollbackTo = db.prepare('ROLLBACK TO write');
  }

  /** Runs `write` (synchronous statements) in the next batch; settles after its commit. */
  run<T>(write: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ write, resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Commits whatever is queued now, synchronously: for closing the database. */
  flushAll(): void {
    while (this.queue.length > 0) this.flush();
  }

  private flush(): void {
    const batch = this.queue.splice(0, MAX_BATCH);
    this.scheduled = this.queue.length > 0;
    if (this.scheduled) setImmediate(() => this.flush());
    const outcomes: { ok: boolean; value: unknown }[] = [];
    try {
      this.begin.run();
      for (const { write } of batch) outcomes.push(this.attempt(write));
      const committing = process.hrtime.bigint();
      this.commit.run();
      this.metrics.groupCommit(batch.length, secondsSince(committing, process.hrtime.bigint()));
      this.commits += 1;
    } catch (error) {
      this.rollback(error);
      for (const pending of batch) pending.reject(error);
      return;
    }
    batch.forEach((pending, i) => {
      const { ok, value } = outcomes[i]!;
      if (ok) pending.resolve(value);
      else pending.reject(value);
    });
  }

  /**
   * Ends a failed batch's transaction. flush runs from setImmediate, so an error thrown here
   * would be uncaught and end the process: a ROLLBACK that fails too (a disk gone, say) is
   * logged, and the batch's writes are refused with the commit's error all the same.
   */
  private rollback(cause: unknown): void {
    try {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
    } catch (error) {
      this.log.error({ err: error, cause }, 'could not roll back a failed group commit');
    }
  }

  private attempt(write: () => unknown): { ok: boolean; value: unknown } {
    this.savepoint.run();
    try {
      const value = write();
      this.release.run();
      return { ok: true, value };
    } catch (error) {
      this.rollbackTo.run();
      this.release.run();
      return { ok: false, value: error };
    }
  }
}
