/**
 * The changes feed rows (issue 26, item 6), on SQLite (power durability) and on PostgreSQL,
 * each on a fresh store and server with plantstore's defaults:
 *
 * 1. What following costs the writers: wrk creates (64 connections, no id) for a turn with no
 *    stream open, with 1 stream following and with 100, in alternating order over the rounds.
 *    Each stream starts at the head of the log and is waited for until it has the turn's last
 *    event, so the server's CPU per create (its PostgreSQL backends' included) holds all the
 *    sending. The ratios are the median of the rounds' ratios, as in the wrk rows: creates/s
 *    with the streams ÷ with none, and CPU per create with none ÷ with the streams.
 * 2. Events a second through one stream and through each of 100: streams opened a few
 *    thousand events back, timed from the opening to the last one having them all (a stream
 *    catching up reads the log a page at a time).
 * 3. The lag from a create's 201 at the client to its event on a stream: `lagCreates` creates,
 *    one every `lagPaceMs`, one stream; p50 and p99 by nearest rank.
 *
 * The streams are read in this harness, on wrk's core; the server runs on the servers' core.
 */
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { IN_FLIGHT_PER_TOKEN } from '../../src/api/limits.js';
import type { StoreConfig } from '../../src/store/open.js';
import { BENCH_POSTGRES_URL, loopbackPort, reachable, seedSchema } from '../data/postgres.js';
import { createToken, createTokens } from '../data/seed.js';
import { cpuOf, cpuSince, machineCpu, treeCpuSeconds } from '../harness/cpu.js';
import { type Server, type ServerSpec, startServer, stop } from '../harness/servers.js';
import { median } from '../harness/summary.js';
import { LIMITS } from '../harness/validity.js';
import { runWrk } from '../harness/wrk.js';
import type { EventsCost, EventsFacts, EventsRun, PhaseContext } from './facts.js';

export interface EventsOptions {
  rounds: number;
  turnSeconds: number;
  /** Streams following in the costlier turn (the other has 1). */
  streams: number;
  /** Events each stream catches up on in the throughput measurement, about. */
  backlog: number;
  lagCreates: number;
  lagPaceMs: number;
  /** The PostgreSQL to measure on as well; none: SQLite only. */
  postgresUrl: string | undefined;
}

export const EVENTS_DEFAULTS: EventsOptions = {
  rounds: 6,
  turnSeconds: 2,
  streams: 100,
  backlog: 5000,
  lagCreates: 200,
  lagPaceMs: 10,
  postgresUrl: BENCH_POSTGRES_URL,
};

/** How long the streams may take to have a turn's last event. */
const CATCH_UP_MS = 60_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The nearest-rank p50 and p99 of `lags`. Pure. */
export function lagRanks(lags: number[]): { p50ms: number; p99ms: number } {
  const sorted = [...lags].sort((a, b) => a - b);
  const rank = (q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
  return { p50ms: rank(0.5), p99ms: rank(0.99) };
}

/**
 * Reads a stream's text as it comes, a chunk at a time: counts its events, keeps the last
 * position, and when each plant's event came (`data: {"id":...`), for the names asked for
 * (`watch`) or for all. A frame may be split across chunks: the unfinished line is kept.
 */
export class FrameCounter {
  events = 0;
  last: bigint | undefined;
  readonly arrivals = new Map<string, number>();
  private tail = '';

  constructor(private readonly keepArrivals: boolean) {}

  take(chunk: string, at: number): void {
    const text = this.tail + chunk;
    const end = text.lastIndexOf('\n');
    if (end === -1) {
      this.tail = text;
      return;
    }
    this.tail = text.slice(end + 1);
    let from = 0;
    for (;;) {
      const line = text.indexOf('\n', from);
      if (line === -1 || line > end) break;
      if (text.startsWith('id: ', from)) {
        this.events += 1;
        this.last = BigInt(text.slice(from + 4, line));
      } else if (this.keepArrivals && text.startsWith('data: {"id":', from)) {
        const id = /^-?\d+/.exec(text.slice(from + 12, line))?.[0];
        if (id !== undefined && !this.arrivals.has(id)) this.arrivals.set(id, at);
      }
      from = line + 1;
    }
  }
}

interface Stream {
  socket: Socket;
  counter: FrameCounter;
}

/** An event stream from after `after`, on a socket of its own, once its head has come. */
function follow(url: string, token: string, after: bigint, arrivals = false): Promise<Stream> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const counter = new FrameCounter(arrivals);
    let opened = false;
    socket.once('error', reject);
    socket.setEncoding('latin1');
    socket.write(
      `GET /events?after=${after} HTTP/1.1\r\nHost: ${hostname}\r\n` +
        `Accept: text/event-stream\r\nAuthorization: Bearer ${token}\r\n\r\n`,
    );
    socket.on('data', (chunk: string) => {
      const at = performance.now();
      if (!opened) {
        if (!chunk.startsWith('HTTP/1.1 200')) {
          reject(new Error(`GET /events: ${chunk.split('\r\n')[0]}`));
          socket.destroy();
          return;
        }
        opened = true;
        resolve({ socket, counter });
        const body = chunk.indexOf('\r\n\r\n');
        chunk = chunk.slice(body + 4);
      }
      counter.take(chunk, at);
    });
  });
}

/**
 * `n` streams of one token, opened at most half its requests in flight at a time: a stream
 * holds its token's place until it is open, and past the cap the server answers 429
 * (docs/api.md, "Requests in flight").
 */
async function followAll(n: number, url: string, token: string, after: bigint) {
  const opening = pLimit(IN_FLIGHT_PER_TOKEN / 2);
  return Promise.all(Array.from({ length: n }, () => opening(() => follow(url, token, after))));
}

/** Waits (polling every 2 ms) until every stream has an event at or past `position`. */
async function caughtUp(streams: Stream[], position: bigint, ms = CATCH_UP_MS): Promise<boolean> {
  const until = performance.now() + ms;
  while (!streams.every((s) => (s.counter.last ?? -1n) >= position)) {
    if (performance.now() > until) return false;
    await sleep(2);
  }
  return true;
}

/** Creates a plant; when its 201 came, and its id. */
async function create(url: string, token: string, name: string) {
  const response = await fetch(`${url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  const at = performance.now();
  const text = await response.text();
  if (response.status !== 201) throw new Error(`POST /plants: ${response.status} ${text}`);
  return { at, id: /"id":(-?\d+)/.exec(text)?.[1] ?? text };
}

/** The position of the log's newest event, paged to from `known` (a position at or below it). */
async function headOf(url: string, token: string, known: bigint): Promise<bigint> {
  let head = known;
  for (;;) {
    const response = await fetch(`${url}/events?after=${head}&limit=1000`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`GET /events: ${response.status} ${text}`);
    const positions = [...text.matchAll(/"position":(\d+)/g)].map((m) => BigInt(m[1]!));
    if (positions.length === 0) return head;
    head = positions.at(-1)!;
  }
}

interface Where {
  database: EventsRun['database'];
  config: StoreConfig;
  spec: ServerSpec;
  tokensFile: string;
  backends?: (serverPid: number) => Promise<number[] | undefined>;
}

interface Turn {
  creates: number;
  seconds: number;
  cpuSeconds: number;
  errors: number;
  wrkCpuSeconds: number;
  /** Shares of a core while wrk ran: the server's own, and wrk's with this harness's. */
  serverShare: number;
  loadShare: number;
}

/**
 * One turn of creates with `n` streams following from the head; the server's (and its
 * backends') CPU from before the load until every stream has the turn's last event.
 */
async function turn(
  ctx: PhaseContext,
  w: Where,
  server: Server,
  token: string,
  n: number,
  o: EventsOptions,
  at: { head: bigint },
  problems: string[],
): Promise<Turn> {
  const streams = await followAll(n, server.url, token, at.head);
  try {
    const dbBefore = cpuOf(await w.backends?.(server.pid));
    const before = treeCpuSeconds(server.pid) ?? NaN;
    const harness = process.cpuUsage();
    const wrk = await runWrk({
      url: server.url,
      connections: 64,
      seconds: o.turnSeconds,
      tokensFile: w.tokensFile,
      load: { mode: 'static', method: 'POST', path: '/plants', body: '{"name":"Bench plant"}' },
      plants: 1,
      start: 0,
      seed: 1,
      ...(ctx.wrkCore !== undefined && { core: ctx.wrkCore }),
    });
    const serverShare = ((treeCpuSeconds(server.pid) ?? NaN) - before) / wrk.seconds;
    const used = process.cpuUsage(harness);
    const loadShare = (wrk.cpuSeconds + (used.user + used.system) / 1e6) / wrk.seconds;
    at.head = await headOf(server.url, token, at.head);
    if (!(await caughtUp(streams, at.head))) {
      problems.push(`${w.database}, ${n} streams: not every stream had every event`);
    }
    const cpuSeconds =
      (treeCpuSeconds(server.pid) ?? NaN) -
      before +
      (w.backends ? cpuSince(dbBefore, cpuOf(await w.backends(server.pid))) : 0);
    const errors = wrk.status + wrk.timeout + wrk.connect + wrk.read + wrk.write;
    return {
      creates: wrk.requests,
      seconds: wrk.seconds,
      cpuSeconds,
      errors,
      wrkCpuSeconds: wrk.cpuSeconds,
      serverShare,
      loadShare,
    };
  } finally {
    for (const stream of streams) stream.socket.destroy();
  }
}

/** Creates/s and CPU per create with `n` streams against none, per round; medians. */
function costOf(n: number, alone: Turn[], followed: Turn[]): EventsCost {
  const rps = (t: Turn) => t.creates / t.seconds;
  const cpu = (t: Turn) => t.cpuSeconds / t.creates;
  const cpuRatios = alone.map((a, i) => cpu(a) / cpu(followed[i]!));
  return {
    streams: n,
    rpsRatio: median(alone.map((a, i) => rps(followed[i]!) / rps(a))),
    cpuRatio: median(cpuRatios),
    cpuRange: [Math.min(...cpuRatios), Math.max(...cpuRatios)],
    createsPerSecond: median(followed.map(rps)),
    cpuUsPerCreate: median(followed.map(cpu)) * 1e6,
    serverShare: median(followed.map((t) => t.serverShare)),
    loadShare: median(followed.map((t) => t.loadShare)),
  };
}

async function measure(ctx: PhaseContext, w: Where, o: EventsOptions, facts: EventsFacts) {
  const token = await createToken(w.config, 'bench events', ['plants:write', 'events:read']);
  const server = await startServer(`plantstore events ${w.database}`, w.spec, ctx.at.serverCores);
  const problems: string[] = [];
  try {
    const machine = machineCpu();
    const started = performance.now();
    const serverBefore = treeCpuSeconds(server.pid) ?? NaN;
    const dbBefore = cpuOf(await w.backends?.(server.pid));
    const harness = process.cpuUsage();
    let wrkCpu = 0;
    const at = { head: 0n };
    const counts = [0, 1, o.streams];
    const turns = new Map<number, Turn[]>(counts.map((n) => [n, []]));
    // A turn before the rounds, not counted: the store and the feed warmed up.
    wrkCpu += (await turn(ctx, w, server, token, 1, o, at, problems)).wrkCpuSeconds;
    for (let round = 0; round < o.rounds; round++) {
      for (const n of round % 2 === 0 ? counts : [...counts].reverse()) {
        const t = await turn(ctx, w, server, token, n, o, at, problems);
        if (t.errors > 0) problems.push(`${w.database}, ${n} streams: ${t.errors} wrk errors`);
        // A write that waits for fsync keeps no server busy; a busy load side may have set
        // the pace instead of the server, as in the wrk rows (harness/validity.ts).
        if (t.loadShare > LIMITS.wrkMax) {
          problems.push(
            `${w.database}, ${n} streams: wrk and the harness used ` +
              `${Math.round(t.loadShare * 100)}% of their core (limit ${LIMITS.wrkMax * 100}%)`,
          );
        }
        turns.get(n)!.push(t);
        wrkCpu += t.wrkCpuSeconds;
      }
    }
    const alone = turns.get(0)!;
    const run: EventsRun = {
      database: w.database,
      alone: {
        createsPerSecond: median(alone.map((t) => t.creates / t.seconds)),
        cpuUsPerCreate: median(alone.map((t) => t.cpuSeconds / t.creates)) * 1e6,
        serverShare: median(alone.map((t) => t.serverShare)),
        loadShare: median(alone.map((t) => t.loadShare)),
      },
      costs: [1, o.streams].map((n) => costOf(n, alone, turns.get(n)!)),
      catchUp: [],
      lag: { creates: o.lagCreates, arrived: 0, p50ms: NaN, p99ms: NaN },
    };
    // Events a second: streams opened about `backlog` events back (positions may skip).
    const from = at.head > BigInt(o.backlog) ? at.head - BigInt(o.backlog) : 0n;
    for (const n of [1, o.streams]) {
      const begun = performance.now();
      const streams = await followAll(n, server.url, token, from);
      const done = await caughtUp(streams, at.head);
      const seconds = (performance.now() - begun) / 1000;
      const events = Math.min(...streams.map((s) => s.counter.events));
      for (const stream of streams) stream.socket.destroy();
      if (!done) problems.push(`${w.database}: ${n} streams did not catch up`);
      run.catchUp.push({ streams: n, events, perStreamPerSecond: events / seconds });
    }
    // The lag, on an idle server.
    const stream = await follow(server.url, token, at.head, true);
    try {
      const lags: number[] = [];
      const started = performance.now();
      for (let i = 0; i < o.lagCreates; i++) {
        const wait = started + i * o.lagPaceMs - performance.now();
        if (wait > 0) await sleep(wait);
        const { at: answered, id } = await create(server.url, token, `events lag ${i}`);
        const until = performance.now() + 10_000;
        while (!stream.counter.arrivals.has(id) && performance.now() < until) await sleep(1);
        const arrival = stream.counter.arrivals.get(id);
        if (arrival !== undefined) lags.push(Math.max(0, arrival - answered));
      }
      run.lag = { creates: o.lagCreates, arrived: lags.length, ...lagRanks(lags) };
      if (lags.length < o.lagCreates) {
        problems.push(
          `${w.database}: ${o.lagCreates - lags.length} events never reached the stream`,
        );
      }
    } finally {
      stream.socket.destroy();
    }
    const after = machineCpu();
    const seconds = (performance.now() - started) / 1000;
    const usage = process.cpuUsage(harness);
    const known =
      (treeCpuSeconds(server.pid) ?? NaN) -
      serverBefore +
      (w.backends ? cpuSince(dbBefore, cpuOf(await w.backends(server.pid))) : 0) +
      wrkCpu +
      (usage.user + usage.system) / 1e6;
    if (machine !== undefined && after !== undefined && Number.isFinite(known)) {
      run.otherCores = (after.busy - machine.busy - known) / seconds;
      if (run.otherCores > LIMITS.otherMax) {
        problems.push(
          `${w.database}: other processes used ${run.otherCores.toFixed(2)} cores ` +
            `(limit ${LIMITS.otherMax})`,
        );
      }
    }
    facts.runs.push(run);
    const f = (x: number) => x.toFixed(2);
    ctx.log(
      `events, ${w.database}: creates/s with 1 stream ÷ none ${f(run.costs[0]!.rpsRatio)}, ` +
        `CPU ${f(run.costs[0]!.cpuRatio)}; with ${o.streams} ${f(run.costs[1]!.rpsRatio)}, ` +
        `CPU ${f(run.costs[1]!.cpuRatio)}; ` +
        run.catchUp
          .map((c) => `${c.perStreamPerSecond.toFixed(0)} events/s through each of ${c.streams}`)
          .join(', ') +
        `; lag p50 ${run.lag.p50ms.toFixed(1)} ms, p99 ${run.lag.p99ms.toFixed(1)} ms`,
    );
  } finally {
    await stop(server);
    facts.problems.push(...problems);
  }
}

export async function eventsPhase(
  ctx: PhaseContext,
  options: EventsOptions = { ...EVENTS_DEFAULTS, rounds: ctx.rounds },
): Promise<EventsFacts> {
  const facts: EventsFacts = {
    rounds: options.rounds,
    turnSeconds: options.turnSeconds,
    streams: options.streams,
    lagPaceMs: options.lagPaceMs,
    runs: [],
    problems: [],
  };
  const started = performance.now();
  try {
    const db = join(ctx.dir, 'events.db');
    const tokensFile = join(ctx.dir, 'events-sqlite.tokens');
    await createTokens({ db }, tokensFile);
    const spec: ServerSpec = {
      kind: 'plantstore',
      db,
      durability: 'power',
      logLevel: ctx.at.logLevel,
    };
    await measure(ctx, { database: 'SQLite', config: { db }, spec, tokensFile }, options, facts);
    const { postgresUrl } = options;
    if (postgresUrl === undefined) return facts;
    const answer = await reachable(postgresUrl);
    if (answer !== true) {
      facts.problems.push(`no PostgreSQL at PLANTSTORE_BENCH_DATABASE_URL (${answer})`);
      return facts;
    }
    const pgTokens = join(ctx.dir, 'events-postgres.tokens');
    const schema = await seedSchema(postgresUrl, 1, pgTokens);
    try {
      const port = loopbackPort(schema.url);
      const backends =
        port === undefined ? undefined : (pid: number) => schema.keeper.backendPids(pid, port);
      const where: Where = {
        database: 'PostgreSQL',
        config: { db: '', databaseUrl: schema.url },
        spec: {
          kind: 'plantstore',
          databaseUrl: schema.url,
          durability: 'power',
          logLevel: ctx.at.logLevel,
        },
        tokensFile: pgTokens,
        ...(backends && { backends }),
      };
      await measure(ctx, where, options, facts);
    } finally {
      await schema.drop();
    }
  } finally {
    ctx.log(`events: ${((performance.now() - started) / 1000).toFixed(0)} s`);
  }
  return facts;
}
