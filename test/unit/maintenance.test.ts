import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AuditEntry, AuditQuery } from '../../src/core/audit.js';
import {
  Maintenance,
  type MaintenanceOptions,
  PRUNE_BATCH,
  type PrunedStore,
} from '../../src/service/maintenance.js';
import type { AuditStore } from '../../src/store/store.js';

// The maintenance loop on a store in memory: what a round deletes, batch by batch, with the
// clock the test gives; failures logged and survived; stop() waiting for a round under way.

const NOW = Date.parse('2026-11-25T12:00:00.000Z');
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** An audit trail in memory: entries by time, pruned as the stores do (oldest first). */
class MemoryAudit implements AuditStore {
  entries: AuditEntry[] = [];
  readonly prunes: { before: string; batch: number }[] = [];
  failing: Error | undefined;

  add(...ages: number[]): void {
    for (const age of ages) {
      const seq = BigInt(this.entries.length + 1);
      this.entries.push({
        seq,
        at: new Date(NOW - age),
        action: 'create',
        plantId: seq,
        tokenId: 1,
        requestId: null,
        before: null,
        after: { id: seq, name: 'Fern' },
      });
    }
  }

  async list({ limit }: AuditQuery): Promise<AuditEntry[]> {
    return this.entries.slice(0, limit);
  }

  async prune(before: Date, batch: number): Promise<number> {
    this.prunes.push({ before: before.toISOString(), batch });
    if (this.failing) throw this.failing;
    const old = this.entries
      .filter((entry) => entry.at < before)
      .sort((a, b) => a.at.getTime() - b.at.getTime())
      .slice(0, batch);
    this.entries = this.entries.filter((entry) => !old.includes(entry));
    return old.length;
  }
}

/** A logger that keeps what it is told. */
function recorder() {
  const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
  const at =
    (level: string) =>
    (fields: Record<string, unknown>, message: string): void =>
      void lines.push({ level, message, fields });
  return { lines, log: { error: at('error'), warn: at('warn'), info: at('info') } };
}

/** A promise and what settles it, for a batch the test holds. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}

/** Expired Idempotency-Keys as counts: each prune answers the next, and records its time. */
function expiredKeys(...counts: number[]) {
  const prunes: { now: string; batch: number }[] = [];
  return {
    prunes,
    async prune(now: Date, batch: number) {
      prunes.push({ now: now.toISOString(), batch });
      return counts.shift() ?? 0;
    },
  };
}

function maintenance(
  store: Omit<PrunedStore, 'idempotency'> & Partial<Pick<PrunedStore, 'idempotency'>>,
  options: Partial<MaintenanceOptions> = {},
) {
  const { lines, log } = recorder();
  const loop = new Maintenance(
    { idempotency: expiredKeys(), ...store },
    { log, now: () => NOW, ...options },
  );
  return { loop, lines };
}

describe('Maintenance', () => {
  it('a round deletes the audit entries older than the retention, by the clock given', async () => {
    const audit = new MemoryAudit();
    // 40 days, 30 days and a minute, 30 days less a minute, an hour, now.
    audit.add(40 * DAY_MS, 30 * DAY_MS + 60_000, 30 * DAY_MS - 60_000, HOUR_MS, 0);
    const { loop, lines } = maintenance({ audit }, { auditRetentionMs: 30 * DAY_MS });
    assert.deepEqual(await loop.round(), {
      takenIds: 0,
      idempotencyKeys: 0,
      auditEntries: 2,
      events: 0,
    });
    assert.deepEqual(audit.prunes, [{ before: '2026-10-26T12:00:00.000Z', batch: PRUNE_BATCH }]);
    assert.deepEqual(
      audit.entries.map((entry) => entry.seq),
      [3n, 4n, 5n],
    );
    assert.deepEqual(lines, [
      {
        level: 'info',
        message: 'deleted audit entries past their retention',
        fields: { deleted: 2, before: '2026-10-26T12:00:00.000Z' },
      },
    ]);
    // Nothing older left: the next round deletes nothing and says nothing.
    assert.deepEqual(await loop.round(), {
      takenIds: 0,
      idempotencyKeys: 0,
      auditEntries: 0,
      events: 0,
    });
    assert.equal(lines.length, 1);
  });

  it('without a retention, leaves the audit trail alone', async () => {
    const audit = new MemoryAudit();
    audit.add(3650 * DAY_MS, 400 * DAY_MS, 0);
    const { loop, lines } = maintenance({ audit });
    assert.deepEqual(await loop.round(), {
      takenIds: 0,
      idempotencyKeys: 0,
      auditEntries: 0,
      events: 0,
    });
    assert.deepEqual(audit.prunes, []);
    assert.equal(audit.entries.length, 3);
    assert.deepEqual(lines, []);
  });

  it('a round deletes the events of the feed older than their retention, batch after batch', async () => {
    const prunes: { before: string; batch: number }[] = [];
    const counts = [PRUNE_BATCH, 3];
    const events = {
      async prune(before: Date, batch: number) {
        prunes.push({ before: before.toISOString(), batch });
        return counts.shift() ?? 0;
      },
    };
    const { loop } = maintenance(
      { audit: new MemoryAudit(), events },
      { eventsRetentionMs: 7 * DAY_MS },
    );
    assert.deepEqual(await loop.round(), {
      takenIds: 0,
      idempotencyKeys: 0,
      auditEntries: 0,
      events: PRUNE_BATCH + 3,
    });
    const before = '2026-11-18T12:00:00.000Z';
    assert.deepEqual(prunes, [
      { before, batch: PRUNE_BATCH },
      { before, batch: PRUNE_BATCH },
    ]);
    const { loop: keeping } = maintenance({ audit: new MemoryAudit(), events });
    assert.equal((await keeping.round()).events, 0, 'no retention: kept');
    assert.equal(prunes.length, 2);
  });

  it('a round deletes the Idempotency-Keys expired by the clock given, batch after batch', async () => {
    const idempotency = expiredKeys(PRUNE_BATCH, 12, 0);
    const { loop, lines } = maintenance({ audit: new MemoryAudit(), idempotency });
    assert.deepEqual(await loop.round(), {
      takenIds: 0,
      idempotencyKeys: PRUNE_BATCH + 12,
      auditEntries: 0,
      events: 0,
    });
    const now = new Date(NOW).toISOString();
    assert.deepEqual(idempotency.prunes, [
      { now, batch: PRUNE_BATCH },
      { now, batch: PRUNE_BATCH },
    ]);
    assert.deepEqual(lines, [], 'routine: not logged');
  });

  it('deletes a large backlog batch after batch, until a batch finds fewer', async () => {
    const audit = new MemoryAudit();
    audit.add(...Array.from({ length: 2 * PRUNE_BATCH + 7 }, () => 2 * DAY_MS), 0);
    const taken: number[] = [PRUNE_BATCH, PRUNE_BATCH, PRUNE_BATCH, 17, 0];
    const batches: number[] = [];
    const pruneTakenIds = async (batch: number) => {
      batches.push(batch);
      return taken.shift()!;
    };
    const { loop } = maintenance({ audit, pruneTakenIds }, { auditRetentionMs: DAY_MS });
    assert.deepEqual(await loop.round(), {
      takenIds: 3 * PRUNE_BATCH + 17,
      idempotencyKeys: 0,
      auditEntries: 2 * PRUNE_BATCH + 7,
      events: 0,
    });
    assert.deepEqual(batches, [PRUNE_BATCH, PRUNE_BATCH, PRUNE_BATCH, PRUNE_BATCH]);
    assert.equal(audit.prunes.length, 3, 'two full batches and the rest');
    assert.equal(audit.entries.length, 1);
    // The next round starts a new pass: one batch that finds nothing.
    assert.deepEqual(await loop.round(), {
      takenIds: 0,
      idempotencyKeys: 0,
      auditEntries: 0,
      events: 0,
    });
    assert.deepEqual(batches.length, 5);
  });

  it('logs a failed prune, prunes the other table all the same, and tries again next round', async () => {
    const audit = new MemoryAudit();
    audit.add(2 * DAY_MS, 0);
    let failures = 1;
    const pruneTakenIds = async () => {
      if (failures-- > 0) throw new Error('connection terminated');
      return 3;
    };
    const { loop, lines } = maintenance({ audit, pruneTakenIds }, { auditRetentionMs: DAY_MS });
    assert.deepEqual(await loop.round(), {
      takenIds: 0,
      idempotencyKeys: 0,
      auditEntries: 1,
      events: 0,
    });
    assert.deepEqual(
      lines.map(({ level, message, fields }) => [level, message, fields.table]),
      [
        ['error', 'pruning failed; will retry', 'ids taken'],
        ['info', 'deleted audit entries past their retention', undefined],
      ],
    );
    assert.match(String(lines[0]!.fields.err), /connection terminated/);

    audit.add(2 * DAY_MS);
    audit.failing = new Error('database is locked');
    assert.deepEqual(await loop.round(), {
      takenIds: 3,
      idempotencyKeys: 0,
      auditEntries: 0,
      events: 0,
    });
    assert.deepEqual(lines.at(-1)?.fields.table, 'audit entries');
    audit.failing = undefined;
    assert.deepEqual(await loop.round(), {
      takenIds: 3,
      idempotencyKeys: 0,
      auditEntries: 1,
      events: 0,
    });
  });

  it('answers a round already under way instead of starting a second', async () => {
    const held = deferred<number>();
    let calls = 0;
    const pruneTakenIds = () => {
      calls += 1;
      return held.promise;
    };
    const { loop } = maintenance({ audit: new MemoryAudit(), pruneTakenIds });
    const first = loop.round();
    assert.equal(loop.round(), first);
    held.resolve(1);
    assert.deepEqual(await first, { takenIds: 1, idempotencyKeys: 0, auditEntries: 0, events: 0 });
    assert.equal(calls, 1);
  });

  it('stop() waits for the batch under way, then starts no other', async () => {
    const held = deferred<number>();
    const batches: number[] = [];
    const pruneTakenIds = (batch: number) => {
      batches.push(batch);
      return held.promise;
    };
    const audit = new MemoryAudit();
    audit.add(2 * DAY_MS);
    const idempotency = expiredKeys(3);
    const { loop, lines } = maintenance(
      { audit, idempotency, pruneTakenIds },
      { auditRetentionMs: DAY_MS, intervalMs: 10 },
    );
    loop.start({ now: true });
    assert.equal(batches.length, 1, 'a first round at once');
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.equal(stopped, false, 'stop() waits for the batch under way');
    // A full batch: had the loop not stopped, it would go on with another.
    held.resolve(PRUNE_BATCH);
    await stopping;
    assert.deepEqual(batches, [PRUNE_BATCH]);
    assert.deepEqual(idempotency.prunes, [], 'no batch of the next tables either');
    assert.deepEqual(audit.prunes, []);
    assert.equal(audit.entries.length, 1);
    assert.deepEqual(lines, []);
  });

  it('stop() during a failing batch logs nothing: a closing store is no fault', async () => {
    const held = deferred<number>();
    const { loop, lines } = maintenance({
      audit: new MemoryAudit(),
      pruneTakenIds: () => held.promise,
    });
    const round = loop.round();
    const stopping = loop.stop();
    held.reject(new Error('the store is closed'));
    await stopping;
    assert.deepEqual(await round, { takenIds: 0, idempotencyKeys: 0, auditEntries: 0, events: 0 });
    assert.deepEqual(lines, []);
  });

  it('start() rounds every interval until stop()', async (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    let calls = 0;
    const pruneTakenIds = async () => {
      calls += 1;
      return 0;
    };
    const { loop } = maintenance({ audit: new MemoryAudit(), pruneTakenIds }, { intervalMs: 1000 });
    loop.start();
    assert.equal(calls, 0, 'no round before the first interval without now');
    t.mock.timers.tick(1000);
    assert.equal(calls, 1);
    await loop.round();
    t.mock.timers.tick(1000);
    assert.equal(calls, 2);
    await loop.stop();
    t.mock.timers.tick(5000);
    assert.equal(calls, 2, 'none after stop()');
  });
});
