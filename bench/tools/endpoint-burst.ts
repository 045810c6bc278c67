// A burst of creates beside healthy webhook endpoints on PostgreSQL (or SQLite, `--sqlite`):
// what the fan-out and the deliveries take from the writes, and how many messages they
// deliver meanwhile. Not a row: two servers from dist/ (`npm run build` first), each on a
// schema (or a file) of its own, one with N
// endpoints subscribed to `plant.created` at a receiver here that answers 204, one with none;
// wrk creates (64 connections, no id) in turns alternating between them, the servers on core
// 0, wrk and this script on core 1 (with taskset). Each server is started for each of its
// turns and stopped after it, both alike, so that the one with endpoints delivers nothing
// during the other's turns (left running, it would: a first version of this tool read 1.16x
// because of it; paused with SIGSTOP, its attempts timed out at each resume). Its backlog, a
// message per endpoint a create, stays in the database from one turn to the next. Each turn
// begins with `--warmup` seconds of the same load, not counted: without it the JIT was still
// compiling through the first second, and a create cost five times the CPU of a warm server's.
// The kind of measurement behind bench/HISTORY.md's "burst beside 1,000 healthy endpoints".
//
//   npx tsx bench/tools/endpoint-burst.ts [--endpoints 1000] [--rounds 6] [--turn 2] [--warmup 2]
//     [--database-url postgres://postgres@127.0.0.1:5432/test | --sqlite]
//
// Prints each pair of turns and their medians: creates/s with endpoints ÷ without, CPU per
// create (the server's and its PostgreSQL backends'), the server's share of its core (under
// 1, the database or the machine set the pace: the figures say what the writes get, not how
// fast the server is), and the messages delivered during each turn.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BENCH_POSTGRES_URL, loopbackPort, seedSchema } from '../data/postgres.js';
import { seedSqlite } from '../data/seed.js';
import { cpuOf, cpuSince, treeCpuSeconds } from '../harness/cpu.js';
import { hasTaskset, pinSelf, type Server, startServer, stop } from '../harness/servers.js';
import { median } from '../harness/summary.js';
import { runWrk } from '../harness/wrk.js';
import { healthyReceiver, subscribeEndpoints } from './healthy-receiver.js';

const { values } = parseArgs({
  options: {
    endpoints: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '6' },
    turn: { type: 'string', default: '2' },
    warmup: { type: 'string', default: '2' },
    'database-url': { type: 'string', default: BENCH_POSTGRES_URL },
    sqlite: { type: 'boolean', default: false },
  },
});
const endpoints = Number(values.endpoints);
const rounds = Number(values.rounds);
const turnSeconds = Number(values.turn);
const warmupSeconds = Number(values.warmup);
const adminUrl = values['database-url'];
const sqlite = values.sqlite;
if (hasTaskset) pinSelf(1);

const receiver = await healthyReceiver();

const dir = mkdtempSync(join(tmpdir(), 'plantstore-burst-'));

interface Side {
  name: string;
  /** Starts the side's server: for each turn (see the top of the file). */
  start: () => Promise<Server>;
  tokensFile: string;
  backends: ((pid: number) => Promise<number[] | undefined>) | undefined;
  turns: {
    perSecond: number;
    cpuUs: number;
    dbUs: number;
    share: number;
    delivered: number;
  }[];
}

const schemas: { drop(): Promise<void> }[] = [];
const sides: Side[] = [];
let running: Server | undefined;
try {
  for (const [name, count] of [
    ['none', 0],
    [`${endpoints} endpoints`, endpoints],
  ] as const) {
    const tokensFile = join(dir, `${count}.tokens`);
    let where: { db: string } | { databaseUrl: string };
    let backends: Side['backends'];
    if (sqlite) {
      where = { db: join(dir, `${count}.db`) };
      await seedSqlite(where.db, 1, tokensFile);
    } else {
      const schema = await seedSchema(adminUrl, 1, tokensFile);
      schemas.push(schema);
      where = { databaseUrl: schema.url };
      const port = loopbackPort(schema.url);
      if (port !== undefined) backends = (pid) => schema.keeper.backendPids(pid, port);
    }
    await subscribeEndpoints({ db: '', ...where }, receiver.url, count);
    const start = () =>
      startServer(
        `plantstore, ${name}`,
        {
          kind: 'plantstore',
          ...where,
          durability: 'power',
          logLevel: 'warn',
          extraArgs: [
            '--rate-limit',
            'off',
            '--webhook-allow-networks',
            '127.0.0.0/8',
            '--webhook-max-endpoints',
            String(Math.max(count, 100)),
          ],
        },
        '0',
      );
    sides.push({
      name,
      start,
      tokensFile,
      backends,
      turns: [],
    });
  }

  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
      const server = await side.start();
      running = server;
      const load = {
        url: server.url,
        connections: 64,
        tokensFile: side.tokensFile,
        load: { mode: 'static', method: 'POST', path: '/plants', body: '{"name":"burst"}' },
        plants: 1,
        start: 0,
        seed: round,
        ...(hasTaskset && { core: 1 }),
      } as const;
      // Not counted: the JIT compiles the paths the turn takes (and the deliveries begin).
      if (warmupSeconds > 0) await runWrk({ ...load, seconds: warmupSeconds });
      const before = treeCpuSeconds(server.pid) ?? NaN;
      const dbBefore = cpuOf(await side.backends?.(server.pid));
      const deliveredBefore = receiver.delivered();
      const wrk = await runWrk({ ...load, seconds: turnSeconds });
      const serverCpu = (treeCpuSeconds(server.pid) ?? NaN) - before;
      const db = side.backends ? cpuSince(dbBefore, cpuOf(await side.backends(server.pid))) : 0;
      await stop(server);
      running = undefined;
      const turn = {
        perSecond: wrk.requests / wrk.seconds,
        cpuUs: ((serverCpu + db) / wrk.requests) * 1e6,
        dbUs: (db / wrk.requests) * 1e6,
        share: serverCpu / wrk.seconds,
        delivered: receiver.delivered() - deliveredBefore,
      };
      side.turns.push(turn);
      console.log(
        `round ${round + 1}, ${side.name}: ${turn.perSecond.toFixed(0)} creates/s, ` +
          `${turn.cpuUs.toFixed(0)} µs CPU a create (${turn.dbUs.toFixed(0)} of it PostgreSQL's), server ${(turn.share * 100).toFixed(0)}% ` +
          `of its core, ${turn.delivered} delivered`,
      );
    }
  }
  const [none, some] = sides as [Side, Side];
  const ratio = median(some.turns.map((t, i) => t.perSecond / none.turns[i]!.perSecond));
  const f = (side: Side, key: 'perSecond' | 'cpuUs' | 'dbUs' | 'share' | 'delivered') =>
    median(side.turns.map((t) => t[key]));
  console.log(
    `medians: creates/s with ${endpoints} endpoints ÷ none ${ratio.toFixed(2)} ` +
      `(${f(some, 'perSecond').toFixed(0)} ÷ ${f(none, 'perSecond').toFixed(0)}); CPU a create ` +
      `${f(some, 'cpuUs').toFixed(0)} µs ÷ ${f(none, 'cpuUs').toFixed(0)} (PostgreSQL's ` +
      `${f(some, 'dbUs').toFixed(0)} ÷ ${f(none, 'dbUs').toFixed(0)}); server ` +
      `${(f(some, 'share') * 100).toFixed(0)}% and ${(f(none, 'share') * 100).toFixed(0)}% of ` +
      `its core; ${f(some, 'delivered').toFixed(0)} messages delivered a turn`,
  );
} finally {
  if (running !== undefined) await stop(running);
  for (const schema of schemas) await schema.drop();
  receiver.close();
  rmSync(dir, { recursive: true, force: true });
}
