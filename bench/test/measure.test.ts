import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import {
  ancestorsOf,
  launchersOf,
  childrenCpuSeconds,
  CLK_TCK,
  cpuSince,
  othersByName,
  parseProcStat,
  processName,
  reapedCpuSeconds,
  statCpuSeconds,
} from '../harness/cpu.js';
import { createdCount, importLines } from '../phases/imports.js';
import { sizeRatio } from '../phases/history.js';
import { parseTcpTable } from '../data/postgres.js';
import { alternating, figures, median, pairedRatios, side } from '../harness/summary.js';
import type { TurnMeasure } from '../harness/turn.js';
import { parseWrkOutput, type WrkResult } from '../harness/wrk.js';

// The benchmark's readings: /proc parsing, wrk's result line, and the figures made of them.

describe('/proc readings', () => {
  it('reads utime + stime after a command name holding spaces and parentheses', () => {
    const fields = ['S', ...Array.from({ length: 10 }, () => '0'), '250', '50', '7', '8'];
    const stat = `4242 (node (a) b) ${fields.join(' ')} 20 0 1`;
    assert.equal(statCpuSeconds(stat), 300 / CLK_TCK);
  });

  it('reads busy (user, nice, system, irq, softirq) and steal from the cpu line', () => {
    const text = 'cpu  100 10 50 9999 77 3 7 20 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n';
    assert.deepEqual(parseProcStat(text), { busy: 170 / CLK_TCK, steal: 20 / CLK_TCK });
    assert.equal(parseProcStat('intr 1 2 3'), undefined);
  });

  it('counts the CPU of processes since a reading, from 0 for those started since', () => {
    const before = new Map([
      [10, 1.5],
      [11, 2],
    ]);
    const after = new Map([
      [10, 2],
      [12, 0.25],
    ]);
    assert.equal(cpuSince(before, after), 0.75);
  });

  it('counts the CPU of the children a process waited for once they ended, not before', () => {
    const before = reapedCpuSeconds(process.pid)!;
    // A child that spends about 0.3 s of CPU; spawnSync waits for it, as a postmaster does.
    const child = spawnSync(process.execPath, [
      '-e',
      'const t = process.cpuUsage(); while (process.cpuUsage(t).user < 300_000);',
    ]);
    assert.equal(child.status, 0);
    const spent = reapedCpuSeconds(process.pid)! - before;
    assert.ok(spent >= 0.25 && spent < 5, `${spent} s`);
    assert.equal(reapedCpuSeconds(2 ** 22 + 1), undefined, 'no such process');
  });

  it("finds a process's ancestors, its parent first, init left out", () => {
    const above = ancestorsOf(process.pid);
    assert.equal(above[0], process.ppid);
    assert.ok(!above.includes(1) && !above.includes(0));
    // This test runs under node's test runner (node), itself under npm or a shell.
    const launchers = launchersOf(process.pid);
    assert.equal(launchers[0], process.ppid);
    assert.deepEqual(launchers, above.slice(0, launchers.length));
  });

  it('names the processes outside the run that used CPU, summed by name', () => {
    const me = process.pid;
    const before = new Map([[me, 1]]);
    const after = new Map([[me, 1.5]]);
    assert.match(processName(me), /node/);
    assert.deepEqual(othersByName(before, after, new Set(), 0.01), { [processName(me)]: 0.5 });
    assert.deepEqual(othersByName(before, after, new Set([me]), 0.01), {}, 'its own left out');
    assert.deepEqual(othersByName(before, after, new Set(), 0.6), {}, 'too little to name');
  });

  it("finds the local ports of a process's connections to one remote port", () => {
    const table = [
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
      '   0: 0100007F:D431 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 111 1',
      '   1: 0100007F:D432 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 222 1',
      '   2: 0100007F:D433 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 333 1',
      '   3: 0100007F:D434 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 444 1',
    ].join('\n');
    // 0x1538 is 5432; inode 222 is someone else's, 333 goes to another port.
    assert.deepEqual(parseTcpTable(table, new Set(['111', '333', '444']), 5432), [0xd431, 0xd434]);
  });
});

const WRK_LINE =
  'BENCH-WRK {"seconds":2.000000,"requests":20000,"sent":20064,"p50us":3000,"p99us":9000,' +
  '"meanUs":3100.5,"maxUs":20000,"connect":0,"read":1,"write":0,"status":2,"timeout":0,' +
  '"cpuSeconds":0.300000}';

describe('parseWrkOutput', () => {
  it("reads load.lua's line after wrk's own report", () => {
    const result = parseWrkOutput(
      `Running 2s test @ http://127.0.0.1:1\n  1 threads\n${WRK_LINE}\n`,
    );
    assert.equal(result.requests, 20000);
    assert.equal(result.sent, 20064);
    assert.equal(result.cpuSeconds, 0.3);
  });

  it('refuses output without the line, or with a field missing', () => {
    assert.throws(() => parseWrkOutput('Running 2s test\n'), /no result line/);
    assert.throws(() => parseWrkOutput(WRK_LINE.replace('"read":1,', '')), /read is not a number/);
  });
});

const wrk = (over: Partial<WrkResult> = {}): WrkResult => ({
  ...parseWrkOutput(WRK_LINE),
  read: 0,
  status: 0,
  ...over,
});

const turn = (
  serverCpu: number,
  over: Partial<WrkResult> = {},
  rest: Partial<TurnMeasure> = {},
) => ({
  contender: 'x',
  wrk: wrk(over),
  serverCpu,
  idleCpu: 0.02,
  wall: 2,
  ...rest,
});

describe('figures', () => {
  it('gives req/s, CPU per request and the shares of a core from one turn', () => {
    const f = figures(turn(1.9, {}, { dbCpu: 0.4, otherCpu: 0.5, steal: 0 }));
    assert.equal(f.rps, 10000);
    assert.ok(Math.abs(f.cpuUs - 95) < 1e-9);
    assert.ok(Math.abs(f.serverShare - 0.95) < 1e-9);
    assert.ok(Math.abs(f.wrkShare - 0.15) < 1e-9);
    assert.ok(Math.abs(f.dbCpuUs! - 20) < 1e-9);
    assert.equal(f.otherCores, 0.25);
    assert.equal(f.idleCores, 0.01);
  });

  it('counts every kind of wrk error, and names them on the side', () => {
    const s = side('a', [turn(1, { read: 2, status: 3 }), turn(1, { timeout: 1 })]);
    assert.equal(s.errors, 6);
    assert.equal(s.errorText, '2 read, 3 status ≥ 400, 1 timeout');
  });

  it('names the processes that made most of the other load, their mean over the turns', () => {
    const s = side('a', [
      turn(
        1,
        {},
        { otherCpu: 0.3, othersByName: { 'kdamond.0': 0.24, 'postgres: walwriter': 0.04 } },
      ),
      turn(1, {}, { otherCpu: 0.2, othersByName: { 'kdamond.0': 0.16, kswapd0: 0.004 } }),
      turn(1),
    ]);
    // Turns of 2 s: kdamond.0 0.12 and 0.08 cores, the walwriter 0.02 and none, kswapd0 too
    // little to name; the turn without a reading does not count.
    assert.equal(s.othersText, 'kdamond.0 0.10, postgres: walwriter 0.01');
    assert.equal(side('b', [turn(1)]).othersText, undefined);
  });

  it('takes medians over turns, ignoring what is not a number', () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.equal(median([Number.NaN, 5]), 5);
    assert.ok(Number.isNaN(median([])));
  });
});

describe('pairedRatios', () => {
  it('is the median over rounds of each round’s ratio, not the ratio of the medians', () => {
    // Round by round the subject is 0.9×, 0.9×, then 15× (a disturbed round) the yardstick;
    // the medians of each side would give 9000 ÷ 5000 = 1.8.
    const subject = [9000, 18000, 30000].map((requests) => turn(1, { requests }));
    const yardstick = [10000, 20000, 2000].map((requests) => turn(1, { requests }));
    assert.equal(side('s', subject).rps / side('y', yardstick).rps, 1.8);
    assert.ok(Math.abs(pairedRatios(subject, yardstick).rps - 0.9) < 1e-9);
  });

  it('keeps the lowest and highest round beside the median', () => {
    const subject = [9000, 18000, 30000].map((requests) => turn(1, { requests }));
    const yardstick = [10000, 20000, 2000].map((requests) => turn(1, { requests }));
    const [low, high] = pairedRatios(subject, yardstick).spread.rps;
    assert.ok(Math.abs(low - 0.9) < 1e-9 && high === 15, `${low} to ${high}`);
  });

  it('puts CPU per request the way up req/s are: yardstick ÷ subject', () => {
    // The subject spends twice the CPU per request: 0.5.
    const r = pairedRatios([turn(2), turn(2)], [turn(1), turn(1)]);
    assert.equal(r.cpu, 0.5);
  });
});

describe('alternating', () => {
  it('gives the items as they are, then reversed, round after round', () => {
    const orders = [0, 1, 2, 3].map((round) => alternating(['a', 'b', 'c'], round).join(''));
    assert.deepEqual(orders, ['abc', 'cba', 'abc', 'cba']);
  });

  it('leaves the list it was given as it was', () => {
    const items = [1, 2];
    alternating(items, 1);
    assert.deepEqual(items, [1, 2]);
  });
});

describe('sizeRatio', () => {
  it("is the median of each round's large time over its small one, with the extremes", () => {
    // The machine slowed down by half from round 2 on: the medians of each side, 1.5 ÷ 1, would
    // read the drift as the data's cost; round by round the large size is 1.1× the small.
    const small = [1, 1, 1.5, 1.5, 1.5];
    const large = [1.1, 1.1, 1.65, 1.65, 1.5];
    const { ratio, spread } = sizeRatio(small, large);
    assert.ok(Math.abs(ratio - 1.1) < 1e-9, `${ratio}`);
    assert.ok(Math.abs(spread[0] - 1) < 1e-9 && Math.abs(spread[1] - 1.1) < 1e-9, `${spread}`);
    // The large size twice as slow: 2, not 0.5.
    assert.equal(sizeRatio([1, 2], [2, 4]).ratio, 2);
  });
});

describe('the import rows', () => {
  it('write lines with ids every other id from the first, or without ids', () => {
    const withIds = importLines(4, 'with ids', 102)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      withIds.map((p: { id: number }) => p.id),
      [102, 104, 106, 108],
    );
    assert.deepEqual(withIds[3], { id: 108, name: 'imported with ids 4', tag: 'shade' });
    const without = importLines(2, 'without ids after with ids', 102).trim().split('\n');
    assert.deepEqual(JSON.parse(without[0]!), { name: 'imported without ids after with ids 1' });
  });

  it("read the created count of the CLI's summary", () => {
    const stderr =
      'imported 10 lines\n/tmp/f: 10 lines: 9 created, 0 created by an earlier run, 1 failed\n';
    assert.equal(createdCount(stderr), 9);
    assert.equal(createdCount('plantstore: cannot reach the server'), undefined);
  });

  it("read the CLI's CPU from the shell's times, after what the CLI printed", () => {
    const stderr =
      '/tmp/f: 10 lines: 10 created, 0 created by an earlier run, 0 failed\n0m0.004s 0m0.002s\n1m2.500s 0m0.250s\n';
    assert.equal(childrenCpuSeconds(stderr), 62.75);
    assert.equal(childrenCpuSeconds('no times here\n'), undefined);
  });
});
