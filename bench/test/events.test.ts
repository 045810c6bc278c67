import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventsPhase, FrameCounter, lagRanks } from '../phases/events.js';
import type { PhaseContext } from '../phases/facts.js';
import { wrkSkip } from '../harness/wrk.js';
import { POSTGRES_SKIP, POSTGRES_URL } from '../../test/helpers/postgres.js';
import { makeTempDir } from '../../test/helpers/temp-dir.js';

// The changes feed rows (bench/phases/events.ts): how a stream's text is counted, the ranks,
// and the phase itself made small against real servers.

const frames = (from: number, to: number) =>
  Array.from(
    { length: to - from + 1 },
    (_, i) =>
      `id: ${from + i}\nevent: plant.created\ndata: {"id":${9007199254740993n + BigInt(from + i)},"name":"x"}\n\n`,
  ).join('');

describe('FrameCounter', () => {
  it('counts every event and keeps the last position, however the text is cut', () => {
    const text = `: plantstore events\n\n${frames(1, 40)}: heartbeat\n\n${frames(41, 50)}`;
    for (const size of [1, 2, 7, 64, 1000, text.length]) {
      const counter = new FrameCounter(true);
      for (let at = 0; at < text.length; at += size) counter.take(text.slice(at, at + size), at);
      assert.equal(counter.events, 50, `chunks of ${size}`);
      assert.equal(counter.last, 50n);
      assert.equal(counter.arrivals.size, 50);
      // Exact ids, past 2^53: the text is read, never parsed as a number.
      assert.ok(counter.arrivals.has(String(9007199254740993n + 50n)));
    }
  });

  it('keeps no arrivals unless asked', () => {
    const counter = new FrameCounter(false);
    counter.take(frames(1, 3), 0);
    assert.equal(counter.events, 3);
    assert.equal(counter.arrivals.size, 0);
  });
});

describe('lagRanks', () => {
  it('takes the nearest rank: of 200, the p99 is the second slowest', () => {
    const lags = Array.from({ length: 200 }, (_, i) => 200 - i);
    assert.deepEqual(lagRanks(lags), { p50ms: 100, p99ms: 198 });
  });
});

describe('the events phase', { skip: wrkSkip('the events phase test') }, () => {
  it('measures the cost of following, events a second and the lag on each database', async (t) => {
    const ctx: PhaseContext = {
      dir: makeTempDir(t),
      at: { serverCores: '0-1', logLevel: 'warn' },
      rounds: 1,
      turnSeconds: 1,
      facts: { starts: [], memory: {}, largePlants: 0, smallPlants: 0 },
      log: (line) => t.diagnostic(line),
    };
    const postgresUrl = POSTGRES_SKIP ? undefined : POSTGRES_URL;
    const facts = await eventsPhase(ctx, {
      rounds: 1,
      turnSeconds: 1,
      streams: 5,
      backlog: 300,
      lagCreates: 10,
      lagPaceMs: 5,
      postgresUrl,
    });
    const databases = postgresUrl === undefined ? ['SQLite'] : ['SQLite', 'PostgreSQL'];
    assert.deepEqual(
      facts.runs.map((r) => r.database),
      databases,
    );
    for (const run of facts.runs) {
      assert.deepEqual(
        run.costs.map((c) => c.streams),
        [1, 5],
      );
      for (const cost of run.costs) {
        assert.ok(cost.createsPerSecond > 0 && cost.cpuUsPerCreate > 0, JSON.stringify(cost));
        assert.ok(Number.isFinite(cost.rpsRatio) && Number.isFinite(cost.cpuRatio));
      }
      assert.deepEqual(
        run.catchUp.map((c) => c.streams),
        [1, 5],
      );
      // Each stream had the whole backlog: the log had far more than 300 events by then.
      for (const c of run.catchUp) assert.ok(c.events >= 250, JSON.stringify(c));
      assert.equal(run.lag.arrived, 10);
      assert.ok(run.lag.p50ms <= run.lag.p99ms && run.lag.p99ms < 10_000);
    }
    // Other load is the machine's business; anything else is the phase's.
    assert.deepEqual(
      facts.problems.filter((p) => !p.includes('other processes used')),
      [],
    );
  });
});
