// The changes feed on SQLite (GET /events): the audit trail read as a log of events. Writes
// take turns on the database's one write lock, across processes too, so the audit entries'
// seq follows the commits (see the migration 0010_changes_feed.sql): an entry is readable, in
// its place, as soon as its write has committed.
import type Database from 'better-sqlite3';
import type { Log } from '../../core/log.js';
import type { EventLog } from '../event-log.js';
import { EVENT_COLUMNS, type EventRow, toChangeEvent } from '../event-rows.js';
import type { MessageSignal } from '../webhook-rows.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites, guard } from './query.js';
import { sqliteTime } from './webhooks.js';

/** How often another process's commits are looked for while anyone listens. */
export const DATA_VERSION_POLL_MS = 50;

/**
 * The log on SQLite. `appended` is fired by this process's plant writes after their commit,
 * with their audit entries (handed to the listeners, who need not read them back); other
 * processes' commits are seen by PRAGMA data_version, which changes when another connection
 * has committed to the file, looked at while anyone listens.
 */
export function sqliteEventLog(
  db: Database.Database,
  batches: GroupCommit,
  appended: MessageSignal<readonly EventRow[] | undefined>,
  log: Log,
): EventLog {
  const write = batchedWrites(batches);
  const horizon = db.prepare('SELECT position FROM event_horizon').pluck();
  const page = db.prepare(
    `SELECT ${EVENT_COLUMNS} FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?`,
  );
  const head = db
    .prepare(
      `SELECT max(coalesce((SELECT max(seq) FROM audit_log), 0),
         (SELECT position FROM event_horizon))`,
    )
    .pluck();
  const oldest = db.prepare('SELECT seq, at FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?');
  const moveHorizon = db.prepare('UPDATE event_horizon SET position = max(position, ?)');
  // One read transaction: a prune commits its deletes and its horizon together.
  const read = db.transaction((after: bigint | undefined, limit: number) => {
    const pruned = horizon.get() as bigint;
    const rows = page.all(after ?? pruned, limit) as EventRow[];
    return { pruned, rows };
  });
  let polling: DataVersionPoll | undefined;
  return {
    async read(after, limit) {
      const { pruned, rows } = guard(() => read(after, limit));
      return { events: rows.map((row) => toChangeEvent(row, sqliteTime)), horizon: pruned };
    },
    head: async () => guard(() => head.get() as bigint),
    prune: (before, batch) =>
      write(() => {
        // The oldest above the horizon, up to the first one young enough to keep: a prefix.
        const rows = oldest.all(horizon.get(), batch) as { seq: bigint; at: bigint }[];
        const kept = rows.findIndex((row) => Number(row.at) >= before.getTime());
        const passed = kept === -1 ? rows : rows.slice(0, kept);
        const last = passed.at(-1);
        if (last !== undefined) moveHorizon.run(last.seq);
        return passed.length;
      }),
    onAppended(listener) {
      polling ??= new DataVersionPoll(db, () => appended.fire(undefined), log);
      polling.add();
      const off = appended.on((entries) =>
        listener(entries && (() => entries.map((entry) => toChangeEvent(entry, sqliteTime)))),
      );
      return () => {
        off();
        polling?.remove();
      };
    },
  };
}

/** Fires `changed` when another connection has committed, while anyone listens. */
class DataVersionPoll {
  private listeners = 0;
  private timer: NodeJS.Timeout | undefined;
  private version: unknown;
  /** A look has failed since the last that succeeded: the streak is logged once. */
  private failing = false;
  private readonly dataVersion: Database.Statement;

  constructor(
    private readonly db: Database.Database,
    private readonly changed: () => void,
    private readonly log: Log,
  ) {
    this.dataVersion = db.prepare('PRAGMA data_version').pluck();
  }

  add(): void {
    this.listeners += 1;
    if (this.timer !== undefined) return;
    this.version = this.read();
    this.timer = setInterval(() => this.look(), DATA_VERSION_POLL_MS).unref();
  }

  remove(): void {
    this.listeners -= 1;
    if (this.listeners > 0) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private look(): void {
    if (!this.db.open) {
      clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    const version = this.read();
    if (version === this.version) return;
    this.version = version;
    this.changed();
  }

  private read(): unknown {
    try {
      const version = this.dataVersion.get();
      if (this.failing) {
        this.failing = false;
        this.log.info({}, "other processes' commits are seen again");
      }
      return version;
    } catch (error) {
      // A locked or closing database: look again at the next tick. Until a look succeeds,
      // streams hear of other processes' commits only by the feed's own slower poll.
      if (!this.failing) {
        this.failing = true;
        this.log.warn({ err: error }, "could not look for other processes' commits; trying again");
      }
      return this.version;
    }
  }
}
