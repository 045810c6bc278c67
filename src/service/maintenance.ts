import type { Log } from '../core/log.js';
import type { AuditStore, EventLog, IdempotencyStore, Store } from '../store/store.js';

/** How often a process prunes what grows with writes. */
export const MAINTENANCE_INTERVAL_MS = 60_000;

/** Rows one statement deletes at most: a prune never holds the database for long. */
export const PRUNE_BATCH = 5_000;

export interface MaintenanceOptions {
  log: Log;
  /** Audit entries older than this are deleted; undefined keeps them all (the default). */
  auditRetentionMs?: number;
  /**
   * Events of the changes feed older than this are deleted (serve's default: 7 days);
   * undefined keeps them all.
   */
  eventsRetentionMs?: number;
  intervalMs?: number;
  /** Unix milliseconds now. */
  now?: () => number;
}

/** What one round deleted. */
export interface Pruned {
  takenIds: number;
  idempotencyKeys: number;
  auditEntries: number;
  events: number;
}

/** What the loop needs of a store: the prunes. */
export interface PrunedStore {
  audit: Pick<AuditStore, 'prune'>;
  idempotency: Pick<IdempotencyStore, 'prune'>;
  pruneTakenIds?: Store['pruneTakenIds'];
  events?: Pick<EventLog, 'prune'>;
}

/**
 * The background loop that keeps the tables that grow with writes bounded, once a minute on
 * every process (rounds on several processes at once delete nothing twice): the records of
 * ids taken that no create needs any more (PostgreSQL; SQLite's creates prune their own), the
 * Idempotency-Keys expired (nothing else deletes them), and, with a retention, the audit
 * entries and the changes feed's events older than theirs. Webhook messages past their retention are deleted by the
 * dispatcher's housekeeping, ended rate-limit windows by RateLimitSync. Each table's bound
 * is in docs/operating.md, "Tables and their growth".
 */
export class Maintenance {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private running: Promise<Pruned> | undefined;

  constructor(
    private readonly store: PrunedStore,
    private readonly options: MaintenanceOptions,
  ) {}

  /** Rounds every interval from now on; with `now`, a first round at once. */
  start({ now = false }: { now?: boolean } = {}): void {
    const interval = this.options.intervalMs ?? MAINTENANCE_INTERVAL_MS;
    this.timer ??= setInterval(() => void this.round(), interval).unref();
    if (now) void this.round();
  }

  /** Stops the rounds; a batch under way finishes, and no other starts. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One round, now; a round already under way is the one answered. */
  round(): Promise<Pruned> {
    this.running ??= this.prune().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async prune(): Promise<Pruned> {
    const { store, options } = this;
    const pruned: Pruned = { takenIds: 0, idempotencyKeys: 0, auditEntries: 0, events: 0 };
    const now = (options.now ?? Date.now)();
    // Each table on its own: one that fails to prune does not keep the others from it.
    if (store.pruneTakenIds !== undefined) {
      const pruneTakenIds = store.pruneTakenIds.bind(store);
      pruned.takenIds = await this.guarded('ids taken', () => this.batches(pruneTakenIds));
    }
    pruned.idempotencyKeys = await this.guarded('idempotency keys', () =>
      this.batches((batch) => store.idempotency.prune(new Date(now), batch)),
    );
    if (options.auditRetentionMs !== undefined) {
      const before = new Date(now - options.auditRetentionMs);
      pruned.auditEntries = await this.guarded('audit entries', () =>
        this.batches((batch) => store.audit.prune(before, batch)),
      );
      if (pruned.auditEntries > 0) {
        options.log.info(
          { deleted: pruned.auditEntries, before: before.toISOString() },
          'deleted audit entries past their retention',
        );
      }
    }
    const { events } = store;
    if (options.eventsRetentionMs !== undefined && events !== undefined) {
      const before = new Date(now - options.eventsRetentionMs);
      pruned.events = await this.guarded('events', () =>
        this.batches((batch) => events.prune(before, batch)),
      );
    }
    return pruned;
  }

  /** What `prune` deleted, or 0 when it failed: logged, and tried again next round. */
  private async guarded(table: string, prune: () => Promise<number>): Promise<number> {
    try {
      return await prune();
    } catch (error) {
      if (!this.stopped)
        this.options.log.error({ err: error, table }, 'pruning failed; will retry');
      return 0;
    }
  }

  /** Deletes batch after batch until one finds fewer than a batch, or the loop stops. */
  private batches(prune: (batch: number) => Promise<number>): Promise<number> {
    return inBatches(prune, () => this.stopped);
  }
}

/**
 * Runs `prune` a batch at a time until a batch finds fewer than PRUNE_BATCH or `stopped`
 * says so, and answers how many it deleted in all.
 */
export async function inBatches(
  prune: (batch: number) => Promise<number>,
  stopped: () => boolean = () => false,
): Promise<number> {
  let total = 0;
  while (!stopped()) {
    const deleted = await prune(PRUNE_BATCH);
    total += deleted;
    if (deleted < PRUNE_BATCH) break;
  }
  return total;
}
