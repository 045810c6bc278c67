import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PhaseContext } from '../phases/facts.js';
import { lagFigures, webhookLagPhase } from '../phases/webhook-lag.js';
import { POSTGRES_SKIP, POSTGRES_URL } from '../../test/helpers/postgres.js';
import { makeTempDir } from '../../test/helpers/temp-dir.js';

// The webhook lag rows (bench/phases/webhook-lag.ts): a healthy endpoint's delivery lag alone
// and beside endpoints that never answer. The figures, and the phase itself made small.

describe('lagFigures', () => {
  it('takes the nearest rank: the p99 of 40 is the slowest, of 200 the second slowest', () => {
    const forty = Array.from({ length: 40 }, (_, i) => 40 - i);
    assert.deepEqual(lagFigures(forty, 40), { arrived: 40, p50ms: 20, p99ms: 40 });
    const many = Array.from({ length: 200 }, (_, i) => i + 1);
    assert.deepEqual(lagFigures(many, 200), { arrived: 200, p50ms: 100, p99ms: 198 });
  });

  it('counts a message that never arrived as never', () => {
    assert.deepEqual(lagFigures([5, 6, 7], 4), { arrived: 3, p50ms: 6, p99ms: Infinity });
    assert.deepEqual(lagFigures([5], 4), { arrived: 1, p50ms: Infinity, p99ms: Infinity });
  });
});

describe('the webhook lag phase', () => {
  it('times every message alone and beside hung endpoints, and stops without waiting for them', async (t) => {
    const ctx: PhaseContext = {
      dir: makeTempDir(t),
      at: { serverCores: '0-1', logLevel: 'warn' },
      rounds: 1,
      turnSeconds: 1,
      facts: { starts: [], memory: {}, largePlants: 0, smallPlants: 0 },
      log: (line) => t.diagnostic(line),
    };
    const postgresUrl = POSTGRES_SKIP ? undefined : POSTGRES_URL;
    const started = performance.now();
    const facts = await webhookLagPhase(ctx, {
      hung: 3,
      creates: 5,
      paceMs: 20,
      waitMs: 10_000,
      postgresUrl,
    });
    const seconds = (performance.now() - started) / 1000;
    t.diagnostic(`${seconds.toFixed(1)} s`);
    const databases = postgresUrl === undefined ? ['SQLite'] : ['SQLite', 'PostgreSQL'];
    assert.deepEqual(
      facts.runs.map((r) => [r.database, r.hung, r.creates, r.arrived]),
      databases.flatMap((d) => [
        [d, 0, 5, 5],
        [d, 3, 5, 5],
      ]),
    );
    for (const run of facts.runs) assert.ok(run.p50ms <= run.p99ms && run.p99ms < 10_000);
    // Other load is the machine's business; anything else is the phase's, a server that
    // waited for its hung attempts to stop included.
    assert.deepEqual(
      facts.problems.filter((p) => !p.includes('other processes used')),
      [],
    );
  });
});
