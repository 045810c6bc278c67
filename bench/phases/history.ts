/**
 * The history rows: what a user reads back of what the store kept, on the small
 * and the large size, one request or command at a time (latency is what matters there):
 *   - `GET /webhooks/{id}/deliveries` (the first page) of an endpoint with that many
 *     messages kept, each delivered in one attempt: wrk at one connection;
 *   - `plantstore audit --plant <id>` with that many audit entries (one create per plant),
 *     for a plant in the middle: the CLI's whole run, start to exit.
 * The messages, attempts and audit entries are written straight to the database, as the
 * store writes them; the endpoint and a webhooks:read token through the store's own code.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type pg from 'pg';
import { TokenService } from '../../src/service/token-service.js';
import { openStore, type StoreConfig } from '../../src/store/open.js';
import { BENCH_POSTGRES_URL, loopbackPort, reachable, seedSchema } from '../data/postgres.js';
import { seedSqlite } from '../data/seed.js';
import { childrenCpuSeconds, cpuOf, cpuSince, machineCpu, treeCpuSeconds } from '../harness/cpu.js';
import {
  hasTaskset,
  PLANTSTORE_BIN,
  ROOT,
  type ServerSpec,
  startServer,
  stop,
} from '../harness/servers.js';
import { median } from '../harness/summary.js';
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

/** A measurement, and why the run is invalid if someone else's load disturbed it. */
function record(facts: HistoryFacts, run: HistoryRun): void {
  facts.runs.push(run);
  if (run.otherCores !== undefined && run.otherCores > LIMITS.otherMax) {
    facts.problems.push(
      `${run.database} ${run.entries}, ${run.what}: other processes used ` +
        `${run.otherCores.toFixed(2)} cores (limit ${LIMITS.otherMax})`,
    );
  }
}

/** Runs of `plantstore audit --plant` timed, after one not timed. */
const AUDIT_RUNS = 5;

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
}

async function measure(
  ctx: PhaseContext,
  w: Where,
  n: number,
  endpoint: bigint,
  tokensFile: string,
  facts: HistoryFacts,
): Promise<void> {
  const server = await startServer(
    `history ${w.database} ${n}`,
    w.spec(ctx.at.logLevel),
    ctx.at.serverCores,
  );
  try {
    const load = {
      mode: 'static',
      method: 'GET',
      path: `/webhooks/${endpoint}/deliveries`,
    } as const;
    const turn = (seconds: number) =>
      runWrk({
        url: server.url,
        connections: 1,
        seconds,
        tokensFile,
        load,
        plants: 1,
        start: 0,
        seed: 1,
        ...(ctx.wrkCore !== undefined && { core: ctx.wrkCore }),
      });
    await turn(1);
    const dbBefore = cpuOf(await w.backends?.(server.pid));
    const cpu = treeCpuSeconds(server.pid) ?? NaN;
    const machine = machineCpu();
    const harness = process.cpuUsage();
    const started = performance.now();
    const wrk = await turn(Math.max(2, ctx.turnSeconds));
    const serverCpu = (treeCpuSeconds(server.pid) ?? NaN) - cpu;
    const seconds = (performance.now() - started) / 1000;
    const dbCpu = w.backends ? cpuSince(dbBefore, cpuOf(await w.backends(server.pid))) : 0;
    const other = otherCores(machine, harness, serverCpu + dbCpu + wrk.cpuSeconds, seconds);
    const errors = wrk.connect + wrk.read + wrk.write + wrk.status + wrk.timeout;
    if (errors > 0) facts.problems.push(`${w.database} ${n}: deliveries, ${errors} errors`);
    record(facts, {
      database: w.database,
      entries: n,
      what: 'deliveries',
      p50ms: wrk.p50us / 1000,
      p99ms: wrk.p99us / 1000,
      samples: wrk.requests,
      ...(other !== undefined && { otherCores: other }),
    });
  } finally {
    await stop(server);
  }
  // The plant in the middle: one entry, found among all of them.
  const argv = [
    process.execPath,
    PLANTSTORE_BIN,
    'audit',
    ...w.args,
    '--plant',
    String(Math.ceil(n / 2)),
  ];
  const pinned = ctx.wrkCore !== undefined && hasTaskset ? ['taskset', '-c', `${ctx.wrkCore}`] : [];
  // In a shell whose `times` gives the command's CPU once it exits.
  const script = '"$@"; code=$?; times >&2; exit $code';
  const args = ['-c', script, 'bash', ...pinned, ...argv];
  const times: number[] = [];
  let cliCpu = 0;
  let machine = machineCpu();
  let harness = process.cpuUsage();
  for (let i = 0; i <= AUDIT_RUNS; i++) {
    // The run not counted is not in the load's reading either.
    if (i === 1) [machine, harness] = [machineCpu(), process.cpuUsage()];
    const started = performance.now();
    const run = spawnSync('bash', args, { cwd: ROOT, encoding: 'utf8' });
    const ms = performance.now() - started;
    if (run.status !== 0 || !run.stdout.includes('create')) {
      facts.problems.push(`${w.database} ${n}: audit exited ${run.status}: ${run.stderr.trim()}`);
      return;
    }
    if (i > 0) {
      times.push(ms);
      cliCpu += childrenCpuSeconds(run.stderr) ?? NaN;
    }
  }
  const total = times.reduce((sum, t) => sum + t, 0) / 1000;
  const other = otherCores(machine, harness, cliCpu, total);
  record(facts, {
    database: w.database,
    entries: n,
    what: 'audit',
    p50ms: median(times),
    p99ms: Math.max(...times),
    samples: times.length,
    ...(other !== undefined && { otherCores: other }),
  });
}

function logRuns(ctx: PhaseContext, facts: HistoryFacts): void {
  for (const r of facts.runs.slice(-2)) {
    ctx.log(
      `${r.what}, ${r.database}, ${r.entries} kept: p50 ${r.p50ms.toFixed(2)} ms, ` +
        `${r.what === 'audit' ? 'slowest' : 'p99'} ${r.p99ms.toFixed(2)} ms`,
    );
  }
}

export async function historyPhase(ctx: PhaseContext): Promise<HistoryFacts> {
  const facts: HistoryFacts = { runs: [], problems: [] };
  const sizes = [ctx.facts.smallPlants, ctx.facts.largePlants];
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
    const where: Where = { database: 'SQLite', args: ['--db', db], spec };
    await measure(ctx, where, n, endpoint, tokensFile, facts);
    logRuns(ctx, facts);
  }
  const answer = await reachable(BENCH_POSTGRES_URL);
  if (answer !== true) {
    facts.problems.push(`no PostgreSQL at PLANTSTORE_BENCH_DATABASE_URL (${answer})`);
    return facts;
  }
  for (const n of sizes) {
    const tokensFile = join(ctx.dir, `history-postgres-${n}.tokens`);
    const schema = await seedSchema(BENCH_POSTGRES_URL, n, `${tokensFile}.plants`);
    try {
      const config = { db: '', databaseUrl: schema.url };
      const endpoint = await endpointAndToken(config, tokensFile);
      await fillPostgres(schema.keeper.client, endpoint, n);
      const spec = (logLevel: string): ServerSpec => ({
        kind: 'plantstore',
        databaseUrl: schema.url,
        durability: 'power',
        logLevel,
      });
      const args = ['--database-url', schema.url];
      const port = loopbackPort(schema.url);
      const backends =
        port === undefined ? undefined : (pid: number) => schema.keeper.backendPids(pid, port);
      await measure(
        ctx,
        { database: 'PostgreSQL', args, spec, ...(backends && { backends }) },
        n,
        endpoint,
        tokensFile,
        facts,
      );
      logRuns(ctx, facts);
    } finally {
      await schema.drop();
    }
  }
  return facts;
}
