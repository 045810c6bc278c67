import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CONTENDERS, type ContenderName, fullPlan, selectGroups } from '../rows/plan.js';
import type { Row } from '../rows/rows.js';
import { SCENARIOS } from '../rows/scenarios.js';
import type { Side } from '../harness/summary.js';
import { readFileSync } from 'node:fs';
import { MISSED_EXPLAINED, targetsTable } from '../report/tables.js';
import type { HistoryRun, ImportKind, ImportRun, LagRun } from '../phases/facts.js';
import { checks, type Facts } from '../report/targets.js';
import { expectations, selfCheckReasons, sideReasons, startReasons } from '../harness/validity.js';

// When a row is invalid, what the targets say of a run, and the plan's consistency.

const busy: Side = {
  name: 'plantstore power',
  turns: 8,
  rps: 10000,
  cpuUs: 95,
  p50ms: 5,
  p99ms: 10,
  errors: 0,
  errorText: '',
  serverShare: 0.97,
  wrkShare: 0.2,
  idleCores: 0.01,
  otherCores: 0.03,
  stealCores: 0,
};
const cpuBound = { cpuBound: true };

describe('sideReasons', () => {
  it('finds nothing wrong with a busy server, an idle load generator and a quiet machine', () => {
    assert.deepEqual(sideReasons(busy, cpuBound), []);
  });

  it('marks the load generator being the busy side', () => {
    const [reason] = sideReasons({ ...busy, wrkShare: 0.9 }, cpuBound);
    assert.match(reason!, /wrk used 90% of its core/);
  });

  it('marks a CPU-bound server held back, but not one that waits for fsync', () => {
    assert.match(sideReasons({ ...busy, serverShare: 0.6 }, cpuBound)[0]!, /used 60% of its core/);
    assert.deepEqual(sideReasons({ ...busy, serverShare: 0.6 }, { cpuBound: false }), []);
  });

  it("marks other processes' load, the run's idle servers counted in", () => {
    assert.match(sideReasons({ ...busy, otherCores: 0.5 }, cpuBound)[0]!, /0\.51 cores/);
    assert.match(
      sideReasons({ ...busy, otherCores: 0, idleCores: 0.2 }, cpuBound)[0]!,
      /idle servers 0\.20/,
    );
    const named = { ...busy, otherCores: 0.2, othersText: 'kdamond.0 0.15' };
    assert.match(sideReasons(named, cpuBound)[0]!, /0\.21 cores.*; the most: kdamond\.0 0\.15$/);
  });

  it('marks steal, errors and wrong statuses', () => {
    assert.match(sideReasons({ ...busy, stealCores: 0.1 }, cpuBound)[0]!, /hypervisor/);
    const errors = { ...busy, errors: 3, errorText: '3 status ≥ 400' };
    assert.match(sideReasons(errors, cpuBound)[0]!, /3 errors \(3 status ≥ 400\)/);
  });
});

describe('expectations', () => {
  it('expects a busy core of reads and of writes that do not wait for the disk, at 64 connections', () => {
    const power = CONTENDERS['plantstore power'].role;
    const process = CONTENDERS['plantstore process'].role;
    assert.equal(expectations(power, false, 64).cpuBound, true);
    assert.equal(expectations(power, true, 64).cpuBound, false);
    assert.equal(expectations(process, true, 64).cpuBound, true);
    assert.equal(expectations(CONTENDERS.fastify.role, true, 64).cpuBound, false);
    assert.equal(expectations(CONTENDERS.bare.role, true, 64).cpuBound, false);
    assert.equal(expectations(CONTENDERS.fastify.role, false, 64).cpuBound, true);
    assert.equal(expectations(power, false, 1).cpuBound, false);
    assert.equal(expectations(CONTENDERS['plantstore postgres'].role, false, 64).cpuBound, false);
  });
});

describe('startReasons', () => {
  it('distrusts the start-to-ready figure when other processes were busy meanwhile', () => {
    assert.deepEqual(startReasons([{ readyMs: 500, otherCores: 0.1 }, { readyMs: 500 }]), []);
    assert.match(startReasons([{ readyMs: 500, otherCores: 0.6 }])[0]!, /up to 0\.60 cores/);
    assert.deepEqual(startReasons([]), []);
  });
});

describe('selfCheckReasons', () => {
  it('holds the self-check to 1 ± 0.05 in req/s and in CPU', () => {
    assert.deepEqual(selfCheckReasons(1.04, 0.96), []);
    assert.equal(selfCheckReasons(1.06, 1).length, 1);
    assert.equal(selfCheckReasons(1, Number.NaN).length, 1);
  });
});

const facts: Facts = {
  starts: [
    { readyMs: 600, otherCores: 0.01 },
    { readyMs: 700 },
    { readyMs: 1200, otherCores: 0.1 },
  ],
  memory: { 'plantstore power': { peakMb: 120, ownPeakMb: 70.4, fileMb: 49.6 } },
  fsyncP50ms: 1,
  largePlants: 1_000_000,
  smallPlants: 10_000,
};

function row(over: Partial<Row>): Row {
  return {
    group: 'sqlite-large/getOne/64',
    scenario: 'getOne',
    data: 'sqlite-large',
    plants: 1_000_000,
    clientIds: 0,
    connections: 64,
    rounds: 8,
    subject: busy,
    yardstick: { ...busy, name: 'fastify' },
    ratios: { rps: 0.96, cpu: 0.94, p99: 1.2, spread: { rps: [0.9, 1.01], cpu: [0.88, 0.99] } },
    selfCheck: false,
    reasons: [],
    ...over,
  };
}

describe('checks', () => {
  it('needs both req/s and CPU per request at the goal', () => {
    const get = checks([row({})], facts).find((c) =>
      c.target.startsWith('GET /plants/{id} SQLite power'),
    );
    assert.equal(get?.met, false, 'CPU 0.94 is under 0.95');
    assert.equal(
      get?.measured,
      'req/s 0.96× (rounds 0.90 to 1.01), CPU 0.94× (rounds 0.88 to 0.99)',
    );
  });

  it('holds creates after client ids to the same creates on the fresh store, within 15%', () => {
    // The row of the two in one group, its ratios the median of its rounds'.
    const verdict = (rps: number) =>
      checks(
        [
          row({
            group: 'sqlite-client-ids/post/64',
            scenario: 'post',
            subject: { ...busy, name: 'plantstore client ids', rps: 9000 },
            yardstick: { ...busy, name: 'plantstore power', rps: 10000 },
            ratios: { rps, cpu: 0.95, p99: 1, spread: { rps: [rps, rps], cpu: [0.9, 1] } },
          }),
        ],
        facts,
      )
        .filter((c) => c.target.includes('client ids above the counter'))
        .map((c) => c.met);
    assert.deepEqual(verdict(0.9), [true, undefined], 'PostgreSQL not measured');
    assert.deepEqual(verdict(0.8), [false, undefined]);
    assert.deepEqual(verdict(1.2), [false, undefined], 'faster by more than 15% is outside too');
    const target = checks([], facts).find((c) => c.target.includes('client ids'))?.target;
    assert.equal(
      target,
      'POST /plants (SQLite, power durability, without an id, 64 connections): ' +
        '1M + 1M client ids above the counter within 15% of 1M fresh (req/s and CPU per request)',
    );
  });

  it('holds creates with endpoints subscribed within 10% of each other, both ways', () => {
    const spread = { rps: [0.9, 1.1], cpu: [0.9, 1.1] } as Row['ratios']['spread'];
    const pair = (subject: string, yardstick: string, rps: number, cpu: number) =>
      row({
        scenario: 'postEndpoints',
        subject: { ...busy, name: subject },
        yardstick: { ...busy, name: yardstick },
        ratios: { rps, cpu, p99: 1, spread },
      });
    const none = 'plantstore power 10k';
    const verdicts = checks(
      [
        pair(`${none}, 1 endpoint`, none, 0.95, 1.02),
        pair(`${none}, 1000 endpoints`, none, 0.89, 1),
        pair(`${none}, 1000 endpoints`, `${none}, 1 endpoint`, 1.05, 1.11),
      ],
      facts,
    ).filter((c) => c.target.includes('webhook endpoints subscribed'));
    assert.deepEqual(
      verdicts.map((c) => c.met),
      [true, false, false, undefined, undefined, undefined],
      'SQLite: 1 met, 1,000 at 0.89 in req/s missed, 1,000 ÷ 1 at 1.11 in CPU missed',
    );
    assert.equal(
      verdicts[1]!.target,
      'POST /plants (SQLite, power durability, 64 connections), webhook endpoints subscribed: ' +
        '1,000 endpoints within 10% of none (req/s and CPU per request)',
    );
  });

  it('holds imports on the large store to the small one, and after ids to the fresh store', () => {
    const run = (plants: number, kind: ImportKind, linesPerSecond: number): ImportRun => ({
      database: 'SQLite',
      plants,
      kind,
      lines: 10_000,
      seconds: 10_000 / linesPerSecond,
      linesPerSecond,
    });
    const runs = [
      run(10_000, 'without ids', 1000),
      run(10_000, 'with ids', 1000),
      run(10_000, 'without ids after with ids', 1000),
      run(1_000_000, 'without ids', 900),
      run(1_000_000, 'with ids', 800),
      run(1_000_000, 'without ids after with ids', 700),
    ];
    const all = checks([], { ...facts, imports: { lines: 10_000, runs, problems: [] } });
    const verdicts = all
      .filter((c) => c.target.startsWith('plants import') && c.target.includes('SQLite'))
      .map((c) => [c.target.split(' (')[0], c.met]);
    assert.deepEqual(verdicts, [
      ['plants import without ids', true],
      ['plants import with ids', false],
      ['plants import without ids after with ids', false],
      ['plants import without ids', false],
    ]);
    assert.ok(
      all
        .filter((c) => c.target.includes('PostgreSQL') && c.target.startsWith('plants import'))
        .every((c) => c.met === undefined),
    );
  });

  it('holds deliveries and the audit command on the large store to the small one', () => {
    const run = (entries: number, what: HistoryRun['what'], p50ms: number): HistoryRun => ({
      database: 'PostgreSQL',
      entries,
      what,
      p50ms,
      p99ms: p50ms * 2,
      samples: 5,
    });
    const runs = [
      run(10_000, 'deliveries', 1),
      run(1_000_000, 'deliveries', 1.1),
      run(10_000, 'audit', 300),
      run(1_000_000, 'audit', 400),
    ];
    const all = checks([], { ...facts, history: { rounds: 8, runs, problems: [] } });
    const verdicts = all
      .filter((c) => /deliveries|audit/.test(c.target) && c.target.includes('PostgreSQL'))
      .map((c) => c.met);
    assert.deepEqual(verdicts, [true, false]);
  });

  it('judges the sizes by the median of the rounds’ ratios where the turns alternated', () => {
    const run = (entries: number, p50ms: number, vsSmall?: HistoryRun['vsSmall']): HistoryRun => ({
      database: 'SQLite',
      entries,
      what: 'deliveries',
      p50ms,
      p99ms: p50ms * 2,
      samples: 500,
      ...(vsSmall && { vsSmall }),
    });
    const verdict = (runs: HistoryRun[]) =>
      checks([], { ...facts, history: { rounds: 8, runs, problems: [] } }).find((c) =>
        c.target.startsWith('GET /webhooks/{id}/deliveries (SQLite'),
      );
    // The medians of the turns 1.7 times apart, while each round read the sizes alike: a drift.
    const drifted = verdict([
      run(10_000, 0.93),
      run(1_000_000, 1.58, { ratio: 1.02, spread: [0.9, 1.3] }),
    ]);
    assert.equal(drifted?.met, true);
    assert.match(drifted?.measured ?? '', /1\.02× \(rounds 0\.90 to 1\.30\)/);
    // Each round's large size slower by half: the data's cost, whatever the medians.
    const slower = verdict([
      run(10_000, 1.0),
      run(1_000_000, 1.0, { ratio: 1.5, spread: [1.4, 1.6] }),
    ]);
    assert.equal(slower?.met, false);
  });

  it("holds a healthy endpoint's lag beside hung ones to its lag alone plus 2 s", () => {
    const run = (hung: number, p50ms: number, p99ms: number, arrived = 40): LagRun => ({
      database: 'SQLite',
      hung,
      creates: 40,
      arrived,
      p50ms,
      p99ms,
    });
    const verdicts = (...runs: LagRun[]) =>
      checks([], {
        ...facts,
        webhookLag: { creates: 40, paceMs: 100, waitMs: 30_000, runs, problems: [] },
      }).filter((c) => c.target.includes('hung endpoints'));
    const [sqlite, postgres] = verdicts(run(0, 30, 100), run(20, 60, 2100));
    assert.equal(sqlite?.met, true);
    assert.equal(postgres?.met, undefined, 'PostgreSQL not measured');
    assert.equal(
      sqlite?.measured,
      'p50 60 ms vs 30 ms, p99 2.1 s vs 100 ms; arrived 40 of 40 vs 40 of 40',
    );
    assert.match(
      sqlite!.target,
      /with 20 hung endpoints ≤ its lag with none \+ 2 s, at p50 and p99/,
    );
    assert.equal(verdicts(run(0, 30, 100), run(20, 60, 2101))[0]?.met, false, 'p99 over');
    assert.equal(verdicts(run(0, 30, 100), run(20, 2031, 2050))[0]?.met, false, 'p50 over');
    const never = verdicts(run(0, 30, 100), run(20, 60, Infinity, 39))[0];
    assert.equal(never?.met, false, 'one message never came');
    assert.match(never!.measured, /p99 never vs 100 ms; arrived 39 of 40/);
    const brokenAlone = verdicts(run(0, 30, Infinity, 39), run(20, 60, Infinity, 39))[0];
    assert.equal(brokenAlone?.met, false, 'nothing to hold it to when one is missing alone');
  });

  it('says "not measured" of a target without its row, and judges the facts', () => {
    const all = checks([], facts);
    assert.equal(all.find((c) => c.target.startsWith('POST /plants PostgreSQL'))?.met, undefined);
    const rss = all.find((c) => c.target.startsWith('peak RSS'));
    assert.equal(rss?.met, true);
    assert.equal(rss?.measured, 'plantstore power 120 MB (own memory at most 70, file pages 50)');
    const over = checks([], {
      ...facts,
      memory: { ...facts.memory, 'plantstore process': { peakMb: 161 } },
    }).find((c) => c.target.startsWith('peak RSS'));
    assert.equal(over?.met, false, 'the peak is judged, whatever of it is file pages');
    assert.match(over!.measured, /, plantstore process 161 MB$/);
    assert.equal(
      all.find((c) => c.target.startsWith('start to ready'))?.measured,
      'median 700 ms of 600, 700, 1200',
    );
  });

  it('holds a power-durable write at one connection to one fsync plus 0.1 ms', () => {
    const one = (p50ms: number) =>
      row({ scenario: 'delete', connections: 1, subject: { ...busy, p50ms } });
    const verdict = (p50ms: number) =>
      checks([one(p50ms)], facts).find((c) => c.target.includes('at 1 connection'))?.met;
    assert.equal(verdict(1.09), true);
    assert.equal(verdict(1.2), false);
  });
});

describe('the targets table', () => {
  it('points a missed target to its explanation, and that section exists', () => {
    assert.ok(targetsTable([row({})], facts).endsWith(MISSED_EXPLAINED));
    const [, file, section] = /`bench\/([^`]+)`, "([^"]+)"\.$/.exec(MISSED_EXPLAINED) ?? [];
    assert.ok(file !== undefined && section !== undefined, MISSED_EXPLAINED);
    const text = readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
    assert.ok(text.includes(`\n## ${section}\n`), `${file}: ${section}`);
  });

  it('has no pointer when nothing missed', () => {
    const spread = { rps: [1.1, 1.3], cpu: [1.1, 1.3] } as Row['ratios']['spread'];
    const met = row({ ratios: { rps: 1.2, cpu: 1.2, p99: 1, spread } });
    assert.ok(!targetsTable([met], facts).includes(MISSED_EXPLAINED));
  });
});

describe('the plan', () => {
  it('runs every contender a row names in that row’s group, and names groups uniquely', () => {
    const groups = fullPlan(64);
    assert.equal(new Set(groups.map((g) => g.id)).size, groups.length);
    for (const g of groups) {
      for (const r of g.rows) {
        for (const name of [r.subject, r.yardstick, r.beside]) {
          if (name !== undefined) assert.ok(g.contenders.includes(name), `${g.id}: ${name}`);
        }
        // A row is the group's data set's (its table says so): its subject runs on it, and so
        // do its yardsticks but where the row compares two data sets (the size targets).
        assert.equal(CONTENDERS[r.subject].data, g.data, `${g.id}: ${r.subject}`);
        const role = (name: string) => JSON.stringify(CONTENDERS[name as ContenderName].role);
        if (CONTENDERS[r.yardstick].data !== g.data) {
          assert.equal(role(r.yardstick), role(r.subject), `${g.id}: ${r.yardstick}`);
        }
      }
    }
  });

  it('measures each size target in one group: both data sets in the same rounds', () => {
    const pairs = fullPlan(64).flatMap((g) =>
      g.rows
        .filter((r) => CONTENDERS[r.yardstick].data !== g.data)
        .map((r) => `${g.id} ${r.subject} ÷ ${r.yardstick}`),
    );
    assert.deepEqual(pairs.sort(), [
      'postgres-client-ids/post/64 plantstore postgres client ids ÷ plantstore postgres',
      'postgres/post/64 plantstore postgres ÷ plantstore postgres 10k',
      'postgres/tagList/64 plantstore postgres ÷ plantstore postgres 10k',
      'sqlite-client-ids/post/64 plantstore client ids ÷ plantstore power',
      'sqlite-large/getOne/64 plantstore power ÷ plantstore power 10k',
      'sqlite-large/list/64 plantstore power ÷ plantstore power 10k',
      'sqlite-large/post/64 plantstore power ÷ plantstore power 10k',
      'sqlite-large/tagList/64 plantstore power ÷ plantstore power 10k',
    ]);
  });

  it('has every target row: four scenarios on SQLite (both durabilities) and PostgreSQL', () => {
    const rows = fullPlan(64).flatMap((g) => g.rows.map((r) => `${g.id} ${r.subject}`));
    for (const s of ['delete', 'post', 'getOne', 'list']) {
      assert.ok(rows.includes(`sqlite-large/${s}/64 plantstore power`));
      assert.ok(rows.includes(`sqlite-large/${s}/64 plantstore process`));
      assert.ok(rows.includes(`postgres/${s}/64 plantstore postgres`));
    }
    assert.ok(rows.includes('sqlite-large/getOne/64 bare'), 'the self-check');
  });

  it('has the rows of the paths users take at both sizes, on SQLite and PostgreSQL', () => {
    const rows = fullPlan(64).flatMap((g) => g.rows.map((r) => `${g.id} ${r.subject}`));
    for (const [large, small] of [
      ['sqlite-large', 'sqlite-small'],
      ['postgres', 'postgres-small'],
    ]) {
      for (const s of ['post', 'tagList']) {
        assert.ok(
          rows.some((r) => r.startsWith(`${large}/${s}/64 `)),
          `${large} ${s}`,
        );
        assert.ok(
          rows.some((r) => r.startsWith(`${small}/${s}/64 `)),
          `${small} ${s}`,
        );
      }
    }
    assert.ok(rows.includes('sqlite-client-ids/post/64 plantstore client ids'));
    assert.ok(rows.includes('postgres-client-ids/post/64 plantstore postgres client ids'));
  });

  it('selects groups by any part of their id', () => {
    const ids = selectGroups(fullPlan(64), ['postgres', '/1']).map((g) => g.id);
    assert.deepEqual(ids, [
      'sqlite-large/post/1',
      'sqlite-large/postKeyed/1',
      'sqlite-large/delete/1',
      'postgres/getOne/64',
      'postgres/list/64',
      'postgres/tagList/64',
      'postgres-small/tagList/64',
      'postgres/post/64',
      'postgres/postKeyed/64',
      'postgres-small/post/64',
      'postgres-client-ids/post/64',
      'postgres-small/postEndpoints/64',
      'postgres/delete/64',
    ]);
  });

  // Servers keep their copies from group to group, and write turns leave each copy laid out
  // after its own server's churn: a read group after them compares different layouts.
  it('runs every read group of a phase before its first write group, on every data set', () => {
    for (const phase of ['sqlite', 'postgres'] as const) {
      const groups = fullPlan(64).filter((g) => g.phase === phase);
      const firstWrite = groups.findIndex((g) => SCENARIOS[g.scenario].writes);
      assert.ok(firstWrite > 0, `${phase}: reads, then writes`);
      const late = groups.slice(firstWrite).filter((g) => !SCENARIOS[g.scenario].writes);
      assert.deepEqual(
        late.map((g) => g.id),
        [],
        `${phase}: read groups after a write`,
      );
      const reads: string[] = groups.slice(0, firstWrite).map((g) => g.scenario);
      for (const s of ['getOne', 'list', 'tagList']) assert.ok(reads.includes(s), `${phase}: ${s}`);
      // DELETE churns the large copies most: the creates' size and client-id rows come before.
      const firstDelete = groups.findIndex((g) => g.scenario === 'delete');
      const after = groups.slice(firstDelete).filter((g) => g.scenario !== 'delete');
      assert.deepEqual(
        after.map((g) => g.id),
        [],
        `${phase}: groups after a DELETE group`,
      );
    }
    // The phases run one after the other, so the plan lists them so.
    const phases = fullPlan(64).map((g) => g.phase);
    assert.deepEqual(
      phases,
      [...phases].sort((a, b) => (a === b ? 0 : a === 'sqlite' ? -1 : 1)),
    );
  });

  it('has creates with 0, 1 and 1,000 endpoints subscribed, in one group on each database', () => {
    for (const none of ['plantstore power 10k', 'plantstore postgres 10k'] as const) {
      const group = fullPlan(64).find(
        (g) => g.scenario === 'postEndpoints' && g.contenders.includes(none),
      );
      assert.deepEqual(
        group?.rows.map((r) => [r.subject, r.yardstick]),
        [
          [`${none}, 1 endpoint`, none],
          [`${none}, 1000 endpoints`, none],
          [`${none}, 1000 endpoints`, `${none}, 1 endpoint`],
        ],
      );
      assert.deepEqual(
        group?.contenders.map((name) => {
          const { role } = CONTENDERS[name];
          return 'endpoints' in role ? role.endpoints : 0;
        }),
        [1, 0, 1000],
      );
    }
  });
});
