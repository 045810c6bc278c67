/**
 * The history rows: what a user reads back of what the store kept, on the small
 * and the large size, one request or command at a time (latency is what matters there):
 *   - `GET /webhooks/{id}/deliveries` (the first page) of an endpoint with that many
 *     messages kept, each delivered in one attempt: wrk at one connection;
 *   - `plantstore audit --plant <id>` with that many audit entries (one create per plant),
 *     for a plant in the middle: the CLI's whole run, start to exit.
 * The messages, attempts and audit entries are written straight to the database, as the
 * store writes them; the endpoint and a webhooks:read token through the store's own code.
 * Both sizes of a database are measured in alternating turns (see measureSizes).
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type pg from 'pg';
import { TokenService } from '../../src/service/token-service.js';
import { openStore, type StoreConfig } from '../../src/store/open.js';
import {
  BENCH_POSTGRES_URL,
  plantstoreOn,
  reachable,
  type SeededSchema,
  seedSchema,
} from '../data/postgres.js';
import { seedSqlite } from '../data/seed.js';
import {
  childrenCpuSeconds,
  cpuOf,
  cpuSince,
  machineCpu,
  reapedCpuSeconds,
  treeCpuSeconds,
} from '../harness/cpu.js';
import {
  hasTaskset,
  PLANTSTORE_BIN,
  ROOT,
  type Server,
  type ServerSpec,
  startServer,
  stop,
} from '../harness/servers.js';
import { alternating, median } from '../harness/summary.js';
import { LIMITS } from '../harness/validity.js';
import { runWrk } from '../harness/wrk.js';
import type { HistoryFacts, HistoryRun, PhaseContext } from './facts.js';

/** Cores' worth of the machine's CPU between two readings not used by `known` seconds. */
function otherCores(
  before: ReturnType<typeof machineCpu>,
  harness: NodeJS.CpuUsage,
  known: number,
  seconds: number,
): number | undefined {
  const after = machineCpu();
  if (before === undefined || after === undefined || !Number.isFinite(known)) return undefined;
  const usage = process.cpuUsage(harness);
  return (after.busy - before.busy - known - (usage.user + usage.system) / 1e6) / seconds;
}

/** A measurement, and (`judged`) why the run is invalid if someone else's load disturbed it. */
function record(facts: HistoryFacts, run: HistoryRun, judged = true): void {
  facts.runs.push(run);
  if (judged && run.otherCores !== undefined && run.otherCores > LIMITS.otherMax) {
    facts.problems.push(
      `${run.database} ${run.entries}, ${run.what}: other processes used ` +
        `${run.otherCores.toFixed(2)} cores (limit ${LIMITS.otherMax})`,
    );
  }
}

/** Pairs of `plantstore audit --plant` runs timed, after one not timed: even, so that each
 * size comes first as often as the other. */
const AUDIT_RUNS = 6;

/**
 * An endpoint and a token allowed to read it, made by plantstore's own code; the token is
 * written to `tokensFile`. Answers the endpoint's id.
 */
async function endpointAndToken(config: StoreConfig, tokensFile: string): Promise<bigint> {
  const store = await openStore({ ...config, durability: 'process' });
  try {
    const endpoint = await store.webhooks.create({
      url: 'http://127.0.0.1:9/',
      events: ['plant.created'],
      secret: `whsec_${'A'.repeat(32)}`,
      at: new Date(),
    });
    const service = new TokenService(store.tokens);
    const input = { name: 'bench history', scopes: ['webhooks:read' as const], expiresInMs: null };
    writeFileSync(tokensFile, `${(await service.create(input)).token}\n`);
    return endpoint.id;
  } finally {
    await store.close();
  }
}

/** A message's payload, as plantPayload writes it, for plant `x` (SQL). */
const PAYLOAD = `'{"id":' || x || ',"name":"plant ' || x || '"}'`;

function fillSqlite(file: string, endpoint: bigint, n: number): void {
  const db = new Database(file);
  const at = Date.now();
  const ids = 'WITH RECURSIVE ids(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM ids WHERE x < @n)';
  try {
    db.pragma('synchronous = OFF');
    db.transaction(() => {
      db.prepare(
        `${ids} INSERT INTO webhook_messages (id, endpoint_id, webhook_id, event_type, payload,
           status, attempts, created_at, next_attempt_at, completed_at)
         SELECT x, @endpoint, 'msg_' || x, 'plant.created', ${PAYLOAD}, 'delivered', 1, @at, @at, @at
         FROM ids`,
      ).run({ n, endpoint, at });
      db.prepare(
        `${ids} INSERT INTO webhook_attempts (message_id, at, duration_ms, http_status, error,
           response_excerpt)
         SELECT x, @at, 1, 204, NULL, '' FROM ids`,
      ).run({ n, at });
      db.prepare(
        `${ids} INSERT INTO audit_log (at, action, plant_id, token_id, request_id, after_name, after_tag)
         SELECT @at, 'create', x, 1, 'req-' || x, 'plant ' || x,
           CASE WHEN x % 4 = 0 THEN 'shade' END FROM ids`,
      ).run({ n, at });
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

async function fillPostgres(client: pg.Client, endpoint: bigint, n: number): Promise<void> {
  const x = 'generate_series(1, $1::bigint) x';
  await client.query(
    `INSERT INTO webhook_messages (id, endpoint_id, webhook_id, event_type, payload, status,
       attempts, created_at, next_attempt_at, completed_at)
     SELECT x, $2::bigint, 'msg_' || x, 'plant.created', ${PAYLOAD}, 'delivered', 1, now(), now(), now()
     FROM ${x}`,
    [n, endpoint.toString()],
  );
  await client.query(
    `INSERT INTO webhook_attempts (message_id, at, duration_ms, http_status, error, response_excerpt)
     SELECT x, now(), 1, 204, NULL, '' FROM ${x}`,
    [n],
  );
  await client.query(
    `INSERT INTO audit_log (at, action, plant_id, token_id, request_id, after_name, after_tag)
     SELECT now(), 'create', x, 1, 'req-' || x, 'plant ' || x, CASE WHEN x % 4 = 0 THEN 'shade' END
     FROM ${x}`,
    [n],
  );
  // The identity columns go on above the rows written with their ids.
  await client.query(
    "SELECT setval(pg_get_serial_sequence('webhook_messages', 'id'), $1::bigint)",
    [n],
  );
  await client.query('VACUUM ANALYZE webhook_messages, webhook_attempts, audit_log');
}

interface Where {
  database: HistoryRun['database'];
  /** The PostgreSQL processes serving the server (PostgresKeeper.backendPids). */
  backends?: (serverPid: number) => Promise<number[] | undefined>;
  /** `--db FILE` or `--database-url URL`. */
  args: string[];
  spec: (logLevel: string) => ServerSpec;
  /** PostgreSQL's postmaster on this machine: the CPU of the backends that ended is its. */
  postmaster?: number;
}

/** One size's store: its entries, its endpoint, a token allowed to read it, and where it is. */
interface Sized {
  n: number;
  endpoint: bigint;
  tokensFile: string;
  where: Where;
}

/** One timed turn of deliveries reads. */
interface DeliveriesTurn {
  p50us: number;
  p99us: number;
  requests: number;
  errors: number;
  otherCores?: number;
}

/**
 * The large size against the small: each round's (or pair's) large figure over the small one
 * of the same round, their median, lowest and highest. Figures are times (p50s, durations).
 */
export function sizeRatio(small: number[], large: number[]): NonNullable<HistoryRun['vsSmall']> {
  const ratios = large.slice(0, small.length).map((l, i) => l / small[i]!);
  return { ratio: median(ratios), spread: [Math.min(...ratios), Math.max(...ratios)] };
}

/**
 * Both sizes of one database, measured in alternating order (small, large; large, small;
 * ...), so that each round's ratio compares two measurements taken moments apart: one after
 * the other, minutes apart, a slow machine's drift read 1.71x in one run and 0.66x in the
 * next for the same code (bench/HISTORY.md).
 */
async function measureSizes(
  ctx: PhaseContext,
  [small, large]: [Sized, Sized],
  facts: HistoryFacts,
): Promise<void> {
  const servers: Server[] = [];
  try {
    for (const s of [small, large]) {
      const name = `history ${s.where.database} ${s.n}`;
      servers.push(await startServer(name, s.where.spec(ctx.at.logLevel), ctx.at.serverCores));
    }
    await deliveries(ctx, [small, large], servers, facts);
  } finally {
    for (const server of servers) await stop(server);
  }
  audits(ctx, [small, large], facts);
}

async function deliveries(
  ctx: PhaseContext,
  sizes: [Sized, Sized],
  servers: Server[],
  facts: HistoryFacts,
): Promise<void> {
  const turn = (i: number, seconds: number) =>
    runWrk({
      url: servers[i]!.url,
      connections: 1,
      seconds,
      tokensFile: sizes[i]!.tokensFile,
      load: { mode: 'static', method: 'GET', path: `/webhooks/${sizes[i]!.endpoint}/deliveries` },
      plants: 1,
      start: 0,
      seed: 1,
      ...(ctx.wrkCore !== undefined && { core: ctx.wrkCore }),
    });
  const timed = async (i: number): Promise<DeliveriesTurn> => {
    const { where } = sizes[i]!;
    const pid = servers[i]!.pid;
    const dbBefore = cpuOf(await where.backends?.(pid));
    const cpu = treeCpuSeconds(pid) ?? NaN;
    const machine = machineCpu();
    const harness = process.cpuUsage();
    const started = performance.now();
    const wrk = await turn(i, ctx.turnSeconds);
    const serverCpu = (treeCpuSeconds(pid) ?? NaN) - cpu;
    const seconds = (performance.now() - started) / 1000;
    const dbCpu = where.backends ? cpuSince(dbBefore, cpuOf(await where.backends(pid))) : 0;
    const other = otherCores(machine, harness, serverCpu + dbCpu + wrk.cpuSeconds, seconds);
    return {
      p50us: wrk.p50us,
      p99us: wrk.p99us,
      requests: wrk.requests,
      errors: wrk.connect + wrk.read + wrk.write + wrk.status + wrk.timeout,
      ...(other !== undefined && { otherCores: other }),
    };
  };
  for (const i of [0, 1]) await turn(i, 1);
  const turns: DeliveriesTurn[][] = [[], []];
  for (let round = 0; round < ctx.rounds; round++) {
    for (const i of alternating([0, 1], round)) turns[i]!.push(await timed(i));
  }
  const p50s = turns.map((mine) => mine.map((t) => t.p50us));
  const vsSmall = sizeRatio(p50s[0]!, p50s[1]!);
  for (const i of [0, 1]) {
    const { where, n } = sizes[i]!;
    const mine = turns[i]!;
    const errors = mine.reduce((sum, t) => sum + t.errors, 0);
    if (errors > 0) facts.problems.push(`${where.database} ${n}: deliveries, ${errors} errors`);
    const others = mine.flatMap((t) => (t.otherCores === undefined ? [] : [t.otherCores]));
    record(facts, {
      database: where.database,
      entries: n,
      what: 'deliveries',
      p50ms: median(mine.map((t) => t.p50us)) / 1000,
      p99ms: median(mine.map((t) => t.p99us)) / 1000,
      samples: mine.reduce((sum, t) => sum + t.requests, 0),
      ...(others.length > 0 && { otherCores: median(others) }),
      ...(i === 1 && { vsSmall }),
    });
  }
}

/** `plantstore audit --plant` on each size in turn, pinned beside wrk's core when it can be. */
function audits(ctx: PhaseContext, sizes: [Sized, Sized], facts: HistoryFacts): void {
  const pinned = ctx.wrkCore !== undefined && hasTaskset ? ['taskset', '-c', `${ctx.wrkCore}`] : [];
  // In a shell whose `times` gives the command's CPU once it exits.
  const script = '"$@"; code=$?; times >&2; exit $code';
  // The plant in the middle: one entry, found among all of them.
  const argsOf = ({ n, where }: Sized) => [
    '-c',
    script,
    'bash',
    ...pinned,
    process.execPath,
    PLANTSTORE_BIN,
    'audit',
    ...where.args,
    '--plant',
    String(Math.ceil(n / 2)),
  ];
  const times: number[][] = [[], []];
  let cliCpu = 0;
  let machine = machineCpu();
  let harness = process.cpuUsage();
  // Each command's own backend ends with it: its CPU is the postmaster's reaped children's.
  const { postmaster } = sizes[0].where;
  const reaped = () => (postmaster === undefined ? 0 : (reapedCpuSeconds(postmaster) ?? NaN));
  let reapedBefore = reaped();
  for (let i = 0; i <= AUDIT_RUNS; i++) {
    // The pair not counted is not in the load's reading either.
    if (i === 1) [machine, harness, reapedBefore] = [machineCpu(), process.cpuUsage(), reaped()];
    for (const k of alternating([0, 1], i)) {
      const sized = sizes[k]!;
      const started = performance.now();
      const run = spawnSync('bash', argsOf(sized), { cwd: ROOT, encoding: 'utf8' });
      const ms = performance.now() - started;
      if (run.status !== 0 || !run.stdout.includes('create')) {
        const where = `${sized.where.database} ${sized.n}`;
        facts.problems.push(`${where}: audit exited ${run.status}: ${run.stderr.trim()}`);
        return;
      }
      if (i > 0) {
        times[k]!.push(ms);
        cliCpu += childrenCpuSeconds(run.stderr) ?? NaN;
      }
    }
  }
  const total = times.flat().reduce((sum, t) => sum + t, 0) / 1000;
  const other = otherCores(machine, harness, cliCpu + reaped() - reapedBefore, total);
  const vsSmall = sizeRatio(times[0]!, times[1]!);
  for (const k of [0, 1]) {
    // One reading of the other load for both sizes' runs: judged once.
    record(
      facts,
      {
        database: sizes[k]!.where.database,
        entries: sizes[k]!.n,
        what: 'audit',
        p50ms: median(times[k]!),
        p99ms: Math.max(...times[k]!),
        samples: times[k]!.length,
        ...(other !== undefined && { otherCores: other }),
        ...(k === 1 && { vsSmall }),
      },
      k === 0,
    );
  }
}

/** Logs the runs recorded from `from` on. */
function logRuns(ctx: PhaseContext, facts: HistoryFacts, from: number): void {
  for (const r of facts.runs.slice(from)) {
    const ratio = r.vsSmall === undefined ? '' : `, ${r.vsSmall.ratio.toFixed(2)}x the small`;
    ctx.log(
      `${r.what}, ${r.database}, ${r.entries} kept: p50 ${r.p50ms.toFixed(2)} ms, ` +
        `${r.what === 'audit' ? 'slowest' : 'p99'} ${r.p99ms.toFixed(2)} ms${ratio}`,
    );
  }
}

export async function historyPhase(ctx: PhaseContext): Promise<HistoryFacts> {
  const facts: HistoryFacts = { rounds: ctx.rounds, runs: [], problems: [] };
  const sizes = [ctx.facts.smallPlants, ctx.facts.largePlants];
  const sqlite: Sized[] = [];
  for (const n of sizes) {
    const db = join(ctx.dir, `history-${n}.db`);
    const tokensFile = join(ctx.dir, `history-${n}.tokens`);
    await seedSqlite(db, n, join(ctx.dir, `history-${n}.plant-tokens`));
    const endpoint = await endpointAndToken({ db }, tokensFile);
    fillSqlite(db, endpoint, n);
    const spec = (logLevel: string): ServerSpec => ({
      kind: 'plantstore',
      db,
      durability: 'power',
      logLevel,
    });
    sqlite.push({
      n,
      endpoint,
      tokensFile,
      where: { database: 'SQLite', args: ['--db', db], spec },
    });
  }
  await measureSizes(ctx, [sqlite[0]!, sqlite[1]!], facts);
  logRuns(ctx, facts, 0);
  const answer = await reachable(BENCH_POSTGRES_URL);
  if (answer !== true) {
    facts.problems.push(`no PostgreSQL at PLANTSTORE_BENCH_DATABASE_URL (${answer})`);
    return facts;
  }
  const schemas: SeededSchema[] = [];
  try {
    const postgres: Sized[] = [];
    for (const n of sizes) {
      const tokensFile = join(ctx.dir, `history-postgres-${n}.tokens`);
      const schema = await seedSchema(BENCH_POSTGRES_URL, n, `${tokensFile}.plants`);
      schemas.push(schema);
      const config = { db: '', databaseUrl: schema.url };
      const endpoint = await endpointAndToken(config, tokensFile);
      await fillPostgres(schema.keeper.client, endpoint, n);
      const { spec, backends } = plantstoreOn(schema);
      const args = ['--database-url', schema.url];
      // Its backends are known only where PostgreSQL is on this machine: so is its postmaster.
      const postmaster = backends ? await schema.keeper.postmasterPid() : undefined;
      const where: Where = {
        database: 'PostgreSQL',
        args,
        spec,
        ...(backends && { backends }),
        ...(postmaster !== undefined && { postmaster }),
      };
      postgres.push({ n, endpoint, tokensFile, where });
    }
    const from = facts.runs.length;
    await measureSizes(ctx, [postgres[0]!, postgres[1]!], facts);
    logRuns(ctx, facts, from);
  } finally {
    for (const schema of schemas) await schema.drop();
  }
  return facts;
}
