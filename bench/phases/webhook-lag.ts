/**
 * The webhook lag rows (issue 23, item 1: a few hung receivers delayed everyone's messages by
 * their timeout): how late a healthy endpoint's messages arrive with no other endpoint, and
 * with 20 more that never answer, on SQLite (power durability) and on PostgreSQL, with
 * plantstore's default webhook settings (15 s timeout, 64 attempts in flight, the default
 * retry schedule); only loopback is allowed, so that the receivers can run here.
 *
 * Each measurement has a fresh database and server. The healthy endpoint is a receiver in this
 * harness answering 204 at once; each hung one an address of its own that takes the
 * connection, reads what comes and never answers. All are subscribed to `plant.created`.
 * One create first, waited for at the healthy endpoint (and until every hung one holds an
 * attempt); then 40 creates, one every 100 ms, each message's lag taken from its create's
 * 201 to its arrival at the healthy endpoint. All within the hung attempts' first 15 s: they
 * hang the whole time, and every create adds a message to each hung endpoint's backlog.
 * The receivers run on the harness's core, the server on the servers' core.
 */
import { once } from 'node:events';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import type { StoreConfig } from '../../src/store/open.js';
import { BENCH_POSTGRES_URL, loopbackPort, reachable, seedSchema } from '../data/postgres.js';
import { createToken } from '../data/seed.js';
import { cpuOf, cpuSince, machineCpu, treeCpuSeconds } from '../harness/cpu.js';
import { type Server, type ServerSpec, startServer, stop } from '../harness/servers.js';
import { LIMITS } from '../harness/validity.js';
import type { LagFacts, LagRun, PhaseContext } from './facts.js';

export interface LagOptions {
  /** The hung endpoints of the second measurement on each database (the first has none). */
  hung: number;
  creates: number;
  paceMs: number;
  waitMs: number;
  /** The PostgreSQL to measure on as well (a schema of its own per server); none: SQLite only. */
  postgresUrl: string | undefined;
}

export const LAG_DEFAULTS: LagOptions = {
  hung: 20,
  creates: 40,
  paceMs: 100,
  waitMs: 30_000,
  postgresUrl: BENCH_POSTGRES_URL,
};

/** What a hung endpoint gets before its attempt may count as begun: well within the 15 s. */
const READY_MS = 10_000;

/**
 * How long a server may take to stop: one that waited for its hung attempts would take its
 * shutdown grace (10 s), which a run of the benchmark cannot afford four times.
 */
const STOP_MS = 5_000;

/**
 * The arrivals and nearest-rank p50 and p99 of the lags of `creates` messages, those that
 * never arrived (missing from `lags`) counted as Infinity. Pure.
 */
export function lagFigures(
  lags: number[],
  creates: number,
): Pick<LagRun, 'arrived' | 'p50ms' | 'p99ms'> {
  const sorted = [...lags].sort((a, b) => a - b);
  while (sorted.length < creates) sorted.push(Infinity);
  const rank = (q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
  return { arrived: lags.length, p50ms: rank(0.5), p99ms: rank(0.99) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether `check()` held within `ms`, asked every 5 ms (arrivals are timed when they come). */
async function held(check: () => boolean, ms: number): Promise<boolean> {
  const until = performance.now() + ms;
  while (!check()) {
    if (performance.now() > until) return false;
    await sleep(5);
  }
  return true;
}

async function listening<T extends HttpServer | NetServer>(server: T): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  return typeof address === 'object' && address !== null ? address.port : 0;
}

/** A receiver answering 204 at once; when each plant's message first arrived. */
async function healthyReceiver() {
  const arrived = new Map<string, number>();
  const server = createHttpServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const at = performance.now();
      const id = /^\{"id":(-?\d+)/.exec(body)?.[1];
      if (id !== undefined && !arrived.has(id)) arrived.set(id, at);
      response.writeHead(204).end();
    });
  });
  const port = await listening(server);
  return { server, arrived, url: `http://127.0.0.1:${port}/healthy` };
}

/** `count` addresses that take connections and never answer; which of them were connected to. */
async function hungReceivers(count: number) {
  const sockets = new Set<Socket>();
  const connected = new Set<number>();
  const servers: NetServer[] = [];
  const urls: string[] = [];
  for (let i = 0; i < count; i++) {
    const server = createNetServer((socket) => {
      connected.add(i);
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
      socket.resume();
    });
    servers.push(server);
    urls.push(`http://127.0.0.1:${await listening(server)}/hung`);
  }
  const close = async () => {
    for (const socket of sockets) socket.destroy();
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  };
  return { urls, connected, close };
}

/** POSTs `body`; when the 201's headers came, and its body. Throws on another status. */
async function created(server: Server, token: string, path: string, body: unknown) {
  const response = await fetch(server.url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const at = performance.now();
  const text = await response.text();
  if (response.status !== 201) throw new Error(`POST ${path}: ${response.status} ${text}`);
  return { at, id: /"id":(-?\d+)/.exec(text)?.[1] ?? text };
}

interface Where {
  database: LagRun['database'];
  config: StoreConfig;
  spec: ServerSpec;
  /** The PostgreSQL processes serving the server (PostgresKeeper.backendPids). */
  backends?: (serverPid: number) => Promise<number[] | undefined>;
}

/** One measurement: a fresh server with the healthy endpoint and `hung` more. */
async function lagRun(ctx: PhaseContext, w: Where, hung: number, o: LagOptions, facts: LagFacts) {
  const what = `${w.database}, ${hung} hung`;
  const token = await createToken(w.config, 'bench webhook lag', [
    'plants:write',
    'webhooks:write',
  ]);
  const healthy = await healthyReceiver();
  const bad = await hungReceivers(hung);
  let server: Server | undefined;
  try {
    const live = await startServer(`webhook lag ${what}`, w.spec, ctx.at.serverCores);
    server = live;
    const subscribe = (url: string) =>
      created(live, token, '/webhooks', { url, events: ['plant.created'] });
    // The healthy endpoint last: the highest id, last in any order the queue takes by id.
    for (const url of bad.urls) await subscribe(url);
    await subscribe(healthy.url);
    const first = await created(live, token, '/plants', { name: 'webhook lag warm-up' });
    const ready = () => healthy.arrived.has(first.id) && bad.connected.size === hung;
    if (!(await held(ready, READY_MS))) {
      facts.problems.push(
        `${what}: within ${READY_MS / 1000} s, the first message ` +
          `${healthy.arrived.has(first.id) ? 'arrived' : 'did not arrive'} and ` +
          `${bad.connected.size} of ${hung} hung endpoints had an attempt`,
      );
    }
    const dbBefore = cpuOf(await w.backends?.(live.pid));
    const cpu = treeCpuSeconds(live.pid) ?? NaN;
    const machine = machineCpu();
    const harness = process.cpuUsage();
    const started = performance.now();
    const answered = new Map<string, number>();
    for (let i = 0; i < o.creates; i++) {
      const wait = started + i * o.paceMs - performance.now();
      if (wait > 0) await sleep(wait);
      const { at, id } = await created(live, token, '/plants', { name: `webhook lag ${i}` });
      answered.set(id, at);
    }
    await held(() => [...answered.keys()].every((id) => healthy.arrived.has(id)), o.waitMs);
    const seconds = (performance.now() - started) / 1000;
    const serverCpu = (treeCpuSeconds(live.pid) ?? NaN) - cpu;
    const dbCpu = w.backends ? cpuSince(dbBefore, cpuOf(await w.backends(live.pid))) : 0;
    const after = machineCpu();
    const usage = process.cpuUsage(harness);
    const lags = [...answered].flatMap(([id, at]) => {
      const arrival = healthy.arrived.get(id);
      return arrival === undefined ? [] : [arrival - at];
    });
    const run: LagRun = {
      database: w.database,
      hung,
      creates: o.creates,
      ...lagFigures(lags, o.creates),
    };
    const known = serverCpu + dbCpu + (usage.user + usage.system) / 1e6;
    if (machine !== undefined && after !== undefined && Number.isFinite(known)) {
      run.otherCores = (after.busy - machine.busy - known) / seconds;
      if (run.otherCores > LIMITS.otherMax) {
        facts.problems.push(
          `${what}: other processes used ${run.otherCores.toFixed(2)} cores ` +
            `(limit ${LIMITS.otherMax})`,
        );
      }
    }
    facts.runs.push(run);
    const ms = (n: number) => (Number.isFinite(n) ? `${n.toFixed(1)} ms` : 'never');
    ctx.log(
      `webhook lag, ${what}: p50 ${ms(run.p50ms)}, p99 ${ms(run.p99ms)}, ` +
        `${run.arrived} of ${run.creates} arrived`,
    );
  } finally {
    // SIGTERM first, so that no new attempt starts; then the hung attempts fail at once and
    // the server need not wait out its shutdown grace for them.
    const stopped = performance.now();
    const stopping = server === undefined ? Promise.resolve() : stop(server);
    await sleep(50);
    await bad.close();
    await stopping;
    const stopMs = performance.now() - stopped;
    if (stopMs > STOP_MS) {
      facts.problems.push(`${what}: the server took ${(stopMs / 1000).toFixed(1)} s to stop`);
    }
    healthy.server.closeAllConnections();
    await new Promise<void>((resolve) => healthy.server.close(() => resolve()));
  }
}

export async function webhookLagPhase(
  ctx: PhaseContext,
  options: LagOptions = LAG_DEFAULTS,
): Promise<LagFacts> {
  const { creates, paceMs, waitMs } = options;
  const facts: LagFacts = { creates, paceMs, waitMs, runs: [], problems: [] };
  const started = performance.now();
  try {
    await lagRuns(ctx, options, facts);
  } finally {
    ctx.log(`webhook lag: ${((performance.now() - started) / 1000).toFixed(0)} s`);
  }
  return facts;
}

async function lagRuns(ctx: PhaseContext, options: LagOptions, facts: LagFacts): Promise<void> {
  for (const hung of [0, options.hung]) {
    const db = join(ctx.dir, `webhook-lag-${hung}.db`);
    const spec: ServerSpec = {
      kind: 'plantstore',
      db,
      durability: 'power',
      logLevel: ctx.at.logLevel,
      extraArgs: ['--webhook-allow-networks', '127.0.0.0/8'],
    };
    await lagRun(ctx, { database: 'SQLite', config: { db }, spec }, hung, options, facts);
  }
  const { postgresUrl } = options;
  if (postgresUrl === undefined) return;
  const answer = await reachable(postgresUrl);
  if (answer !== true) {
    facts.problems.push(`no PostgreSQL at PLANTSTORE_BENCH_DATABASE_URL (${answer})`);
    return;
  }
  for (const hung of [0, options.hung]) {
    const schema = await seedSchema(
      postgresUrl,
      1,
      join(ctx.dir, `webhook-lag-postgres-${hung}.tokens`),
    );
    try {
      const spec: ServerSpec = {
        kind: 'plantstore',
        databaseUrl: schema.url,
        durability: 'power',
        logLevel: ctx.at.logLevel,
        extraArgs: ['--webhook-allow-networks', '127.0.0.0/8'],
      };
      const port = loopbackPort(schema.url);
      const backends =
        port === undefined ? undefined : (pid: number) => schema.keeper.backendPids(pid, port);
      const where: Where = {
        database: 'PostgreSQL',
        config: { db: '', databaseUrl: schema.url },
        spec,
        ...(backends && { backends }),
      };
      await lagRun(ctx, where, hung, options, facts);
    } finally {
      await schema.drop();
    }
  }
}
