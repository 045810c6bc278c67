// The log of plant events on SQLite (GET /events): each write records its event in its own
// savepoint (sqliteEventRecorder), numbered as it runs; writes take turns on the database's
// one write lock, across processes too, so positions follow the commits (see the migration
// 0010_plant_events.sql).
import type Database from 'better-sqlite3';
import type { ChangeEvent } from '../../core/change-events.js';
import { plantPayload, type WebhookEvent } from '../../core/webhooks/events.js';
import type { Plant } from '../../core/plant.js';
import type { EventLog } from '../event-log.js';
import type { MessageSignal } from '../webhook-rows.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites, guard } from './query.js';
import { sqliteTime } from './webhooks.js';

/** How often another process's commits are looked for while anyone listens. */
export const DATA_VERSION_POLL_MS = 50;

/** Records a write's event; run inside the write's savepoint. */
export function sqliteEventRecorder(db: Database.Database) {
  const insert = db.prepare('INSERT INTO plant_events (type, at, data) VALUES (?, ?, ?)');
  return (event: WebhookEvent, plant: Plant): void => {
    insert.run(event, Date.now(), plantPayload(plant));
  };
}

export type EventRecorder = ReturnType<typeof sqliteEventRecorder>;

interface EventRow {
  position: bigint;
  type: WebhookEvent;
  at: bigint;
  data: string;
}

/**
 * The log on SQLite. `appended` is fired by this process's plant writes after their commit;
 * other processes' commits are seen by PRAGMA data_version, which changes when another
 * connection has committed to the file, looked at while anyone listens.
 */
export function sqliteEventLog(
  db: Database.Database,
  batches: GroupCommit,
  appended: MessageSignal,
): EventLog {
  const write = batchedWrites(batches);
  const horizon = db.prepare('SELECT pruned_through FROM plant_event_horizon').pluck();
  const page = db.prepare(
    `SELECT position, type, at, data FROM plant_events WHERE position > ?
     ORDER BY position LIMIT ?`,
  );
  const head = db.prepare(
    `SELECT max(coalesce((SELECT max(position) FROM plant_events), 0),
       (SELECT pruned_through FROM plant_event_horizon))`,
  );
  const oldest = db.prepare('SELECT position, at FROM plant_events ORDER BY position LIMIT ?');
  const remove = db.prepare('DELETE FROM plant_events WHERE position <= ?');
  const moveHorizon = db.prepare(
    'UPDATE plant_event_horizon SET pruned_through = max(pruned_through, ?)',
  );
  const read = db.transaction((after: bigint | undefined, limit: number) => {
    // One read transaction: a prune commits its deletes and its horizon together.
    const pruned = horizon.get() as bigint;
    const rows = page.all(after ?? pruned, limit) as EventRow[];
    return { pruned, rows };
  });
  let polling: DataVersionPoll | undefined;
  return {
    async read(after, limit) {
      const { pruned, rows } = guard(() => read(after, limit));
      const events: ChangeEvent[] = rows.map((row) => ({
        position: row.position,
        type: row.type,
        at: sqliteTime(row.at),
        data: row.data,
      }));
      return { events, horizon: pruned };
    },
    head: async () => guard(() => head.pluck().get() as bigint),
    prune: (before, batch) =>
      write(() => {
        // The oldest first, up to the first one young enough to keep: a prefix.
        const rows = oldest.all(batch) as { position: bigint; at: bigint }[];
        const kept = rows.findIndex((row) => Number(row.at) >= before.getTime());
        const gone = kept === -1 ? rows : rows.slice(0, kept);
        const last = gone.at(-1);
        if (last === undefined) return 0;
        remove.run(last.position);
        moveHorizon.run(last.position);
        return gone.length;
      }),
    onAppended(listener) {
      polling ??= new DataVersionPoll(db, () => appended.fire());
      polling.add();
      const off = appended.on(listener);
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
  private readonly dataVersion: Database.Statement;

  constructor(
    private readonly db: Database.Database,
    private readonly changed: () => void,
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
      return this.dataVersion.get();
    } catch {
      // A locked or closing database: look again at the next tick.
      return this.version;
    }
  }
}
