/**
 * One turn: wrk loads one server for a few seconds while the CPU time of the server, of wrk,
 * of this harness, of the server's PostgreSQL backends and of the whole machine is read
 * before and after.
 */
import { spawnSync } from 'node:child_process';
import {
  launchersOf,
  machineCpu,
  othersByName,
  processCpuSeconds,
  processTable,
  processTree,
  statusMb,
  treeCpuSeconds,
} from './cpu.js';
import type { Server } from './servers.js';
import { type LoadSpec, runWrk, type WrkResult } from './wrk.js';

/** What a contender is, for the rules and the report. */
export interface Role {
  kind: 'plantstore' | 'fastify' | 'bare';
  database: 'sqlite' | 'postgres';
  /** plantstore's --durability; the yardsticks have none. */
  durability?: 'power' | 'process';
  /** plantstore with --metrics-port: what measuring costs (at most 3%). */
  metrics?: boolean;
  /** A Fastify yardstick with Fastify's own logger and plugins (yardsticks/fastify-plugins.ts). */
  plugins?: boolean;
  /** plantstore with this many webhook endpoints subscribed to plant.created (data/endpoints.ts). */
  endpoints?: number;
}

/**
 * Puts a server's table back between turns, outside the measured time: the plants a DELETE
 * turn removed, and the plants a POST turn added (bench/data/ has one for each database).
 */
export interface Keeper {
  /** Puts plants from..to back as seeded, where missing. */
  refill(from: number, to: number): Promise<void>;
  /** Deletes the plants with an id above `plants`, but those clients chose in the seed. */
  trim(plants: number): Promise<void>;
  /**
   * Deletes the webhook messages that ended and their attempts; the pending ones stay, as
   * full endpoints keep them. Answers how many it deleted.
   */
  clearEndedMessages(): Promise<number>;
  close(): Promise<void>;
}

/** A live server in the harness: where it runs, its data, and where its DELETE walk is. */
export interface Contender {
  name: string;
  role: Role;
  server: Server;
  keeper: Keeper;
  tokensFile: string;
  /** Plants 1..plants exist at the start of every turn. */
  plants: number;
  /** The last id a DELETE walk used. */
  cursor: number;
  /** What the previous turn's restore asks to be done again before this contender's next. */
  redo?: () => Promise<void>;
  /** The PostgreSQL backends serving this server, whose CPU counts as the database's. */
  backends?: () => Promise<number[] | undefined>;
  /** The largest RssAnon (MB) read as one of its turns ended: its own memory under load. */
  ownPeakMb?: number;
}

/** What a turn runs (bench/rows/scenarios.ts has them all). */
export interface Scenario {
  label: string;
  /** The status every answer must have; wrk counts those above 399 as errors. */
  expected: number;
  load: LoadSpec;
  /** Writes: the server waits for the disk or the database, not only for its CPU. */
  writes: boolean;
  /** Once per contender, before its first turn of this scenario. */
  prepare?: (c: Contender) => Promise<void>;
  /**
   * After a turn, once the server is idle: puts the table back. Returns what to do once
   * more before the contender's next turn, for a write that committed after this returned.
   */
  restore?: (c: Contender, result: WrkResult) => Promise<() => Promise<void>>;
  /** One request for the probe before the measurement: method, path, body. */
  probe: { method: string; path: (plants: number) => string; body?: string };
}

/** One turn's readings; CPU in seconds (core-seconds for the machine). */
export interface TurnMeasure {
  contender: string;
  wrk: WrkResult;
  serverCpu: number;
  /** CPU of the server's PostgreSQL backends; undefined where it cannot be read. */
  dbCpu?: number;
  /** CPU of the other servers of the run, idle meanwhile (timers, the token cache). */
  idleCpu: number;
  /** The machine's busy time minus everything above and this harness: someone else's load. */
  otherCpu?: number;
  /** Who made that other load: CPU seconds by process name, those of 10 ms or more. */
  othersByName?: Record<string, number>;
  steal?: number;
  /** Seconds from the first reading to the last. */
  wall: number;
}

interface Reading {
  at: number;
  server: number | undefined;
  idle: number;
  db: number | undefined;
  machine: ReturnType<typeof machineCpu>;
  harness: NodeJS.CpuUsage;
}

function read(pid: number, idle: number[], backends: number[] | undefined): Reading {
  const db = backends?.reduce<number | undefined>((sum, p) => {
    const s = processCpuSeconds(p);
    return sum === undefined || s === undefined ? undefined : sum + s;
  }, 0);
  return {
    at: performance.now() / 1000,
    server: treeCpuSeconds(pid),
    idle: idle.reduce((sum, p) => sum + (treeCpuSeconds(p) ?? 0), 0),
    db,
    machine: machineCpu(),
    harness: process.cpuUsage(),
  };
}

/**
 * The CPU of the backends the server connected during the turn: all of it is the turn's. A
 * pool fills under load (pg closes connections idle for 10 s), and a new backend is started,
 * its caches filled and the statements prepared again: the new ones of one warm-up turn took
 * 0.4 s of CPU in a 1 s turn. They counted as other processes' load before, enough to mark a
 * row invalid in a measured turn.
 */
function newBackendsCpu(before: number[] | undefined, now: number[] | undefined): number {
  if (before === undefined || now === undefined) return 0;
  const known = new Set(before);
  return now.filter((p) => !known.has(p)).reduce((sum, p) => sum + (processCpuSeconds(p) ?? 0), 0);
}

/** Waits until the server has answered everything it had read when wrk closed its sockets. */
async function settle(url: string): Promise<void> {
  await (await fetch(`${url}/healthz`)).arrayBuffer();
}

export interface TurnOptions {
  connections: number;
  seconds: number;
  seed: number;
  /** Cores for wrk (taskset), when pinned. */
  wrkCore?: number;
  /** The pids of every server of the run, the loaded one included. */
  serverPids: number[];
}

export async function measureTurn(
  c: Contender,
  scenario: Scenario,
  o: TurnOptions,
): Promise<TurnMeasure> {
  await c.redo?.();
  c.redo = undefined;
  // Every turn starts with nothing of earlier turns left for the kernel to write back:
  // otherwise a write turn's checkpoints fsync what the turns before it dirtied, and two
  // copies of one server read 0.94 and 1.06 of each other on DELETE (bench/HISTORY.md).
  spawnSync('sync');
  const backends = await c.backends?.();
  const idle = o.serverPids.filter((p) => p !== c.server.pid);
  const tableBefore = processTable();
  const before = read(c.server.pid, idle, backends);
  const wrk = await runWrk({
    url: c.server.url,
    connections: o.connections,
    seconds: o.seconds,
    tokensFile: c.tokensFile,
    load: scenario.load,
    plants: c.plants,
    start: c.cursor,
    seed: o.seed,
    ...(o.wrkCore !== undefined && { core: o.wrkCore }),
  });
  const after = read(c.server.pid, idle, backends);
  const tableAfter = processTable();
  // Everything this harness started (wrk, every server and its workers), what started it and
  // the loaded server's backends, those its pool opened during the turn too, are accounted
  // for; what else ran is named.
  const backendsNow = await c.backends?.();
  const mine = new Set([
    ...processTree(process.pid),
    ...LAUNCHERS,
    ...(backends ?? []),
    ...(backendsNow ?? []),
  ]);
  const others = othersByName(tableBefore, tableAfter, mine, 0.01);
  const launchers = LAUNCHERS.reduce(
    (sum, pid) => sum + (tableAfter.get(pid) ?? 0) - (tableBefore.get(pid) ?? 0),
    0,
  );
  const own = statusMb(c.server.pid, 'RssAnon');
  if (own !== undefined) c.ownPeakMb = Math.max(c.ownPeakMb ?? 0, own);
  if (after.db !== undefined) after.db += newBackendsCpu(backends, backendsNow);
  await settle(c.server.url);
  if (scenario.restore) c.redo = await scenario.restore(c, wrk);
  if (before.server === undefined || after.server === undefined) {
    throw new Error(`${c.name} (pid ${c.server.pid}) ended during its turn`);
  }
  const m = measureOf(c.name, wrk, before, after);
  if (m.otherCpu !== undefined) {
    m.otherCpu -= launchers;
    m.othersByName = others;
  }
  return m;
}

/**
 * What started this harness: npm, its shell and tsx's own process, which relays the harness's
 * output. Their CPU is the harness's, not another load; the ancestors above them (a terminal,
 * a CI agent) are not the harness and stay counted.
 */
const LAUNCHERS = launchersOf(process.pid);

function measureOf(
  contender: string,
  wrk: WrkResult,
  before: Reading,
  after: Reading,
): TurnMeasure {
  const serverCpu = after.server! - before.server!;
  const dbCpu =
    after.db !== undefined && before.db !== undefined ? after.db - before.db : undefined;
  const harness =
    (after.harness.user + after.harness.system - before.harness.user - before.harness.system) / 1e6;
  const idleCpu = after.idle - before.idle;
  const m: TurnMeasure = { contender, wrk, serverCpu, idleCpu, wall: after.at - before.at };
  if (dbCpu !== undefined) m.dbCpu = dbCpu;
  if (before.machine !== undefined && after.machine !== undefined) {
    const busy = after.machine.busy - before.machine.busy;
    m.otherCpu = busy - serverCpu - idleCpu - wrk.cpuSeconds - harness - (dbCpu ?? 0);
    m.steal = after.machine.steal - before.machine.steal;
  }
  return m;
}
