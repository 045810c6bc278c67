/**
 * The import rows: the real CLI, `plantstore plants import` with its default
 * settings, importing a JSON Lines file into a running plantstore server, as a user does.
 * Lines per second over the whole process, from its start to its exit.
 *
 * On each database (SQLite, power durability; PostgreSQL) and each size (the large and the
 * small data set), one server on fresh data imports three files in turn (the two sizes'
 * servers side by side, kind by kind: see importRuns):
 *   1. lines without ids, on the fresh store;
 *   2. lines with ids, every other id above the server's counter (the ids clients choose
 *      where the server would have gone on);
 *   3. lines without ids again: every other id the server would assign is now taken.
 * The CLI runs where wrk runs (the harness's core), the server on the servers' core.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_POSTGRES_URL, plantstoreOn, reachable, seedSchema } from '../data/postgres.js';
import { seedSqlite } from '../data/seed.js';
import { childrenCpuSeconds, cpuOf, cpuSince, machineCpu, treeCpuSeconds } from '../harness/cpu.js';
import {
  hasTaskset,
  PLANTSTORE_BIN,
  ROOT,
  type Server,
  type ServerSpec,
  startServer,
  stop,
} from '../harness/servers.js';
import { alternating } from '../harness/summary.js';
import { LIMITS } from '../harness/validity.js';
import {
  IMPORT_KINDS,
  type ImportFacts,
  type ImportKind,
  type ImportRun,
  type PhaseContext,
} from './facts.js';

/**
 * The lines of one file: `{"name": ...}`, or with ids `{"id": ..., "name": ...}` for the ids
 * `firstId`, `firstId + 2`, ... One line in four is tagged, as the seeded plants are.
 */
export function importLines(count: number, kind: ImportKind, firstId: number): string {
  const lines: string[] = [];
  for (let i = 0; i < count; i++) {
    const tag = i % 4 === 3 ? ',"tag":"shade"' : '';
    const id = kind === 'with ids' ? `"id":${firstId + 2 * i},` : '';
    lines.push(`{${id}"name":"imported ${kind} ${i + 1}"${tag}}`);
  }
  return `${lines.join('\n')}\n`;
}

/** The created count of the CLI's summary line (`...: 10 lines: 10 created, ...`). */
export function createdCount(stderr: string): number | undefined {
  const match = /: (\d+) lines: (\d+) created, /.exec(stderr);
  return match === null ? undefined : Number(match[2]);
}

/**
 * Runs the CLI once, in a shell whose `times` gives the CLI's CPU after it exits; its wall
 * time, CPU and what it printed on stderr.
 */
function runImport(
  server: Server,
  token: string,
  file: string,
  core: number | undefined,
): Promise<{ seconds: number; code: number | null; stderr: string; cpu?: number }> {
  const argv = [process.execPath, PLANTSTORE_BIN, 'plants', 'import', '--url', server.url, file];
  const pinned = core !== undefined && hasTaskset ? ['taskset', '-c', String(core)] : [];
  const script = '"$@"; code=$?; times >&2; exit $code';
  const [cmd, args] = ['bash', ['-c', script, 'bash', ...pinned, ...argv]];
  const started = performance.now();
  const child = spawn(cmd, args, {
    cwd: ROOT,
    env: { ...process.env, PLANTSTORE_TOKEN: token },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      const seconds = (performance.now() - started) / 1000;
      const cpu = childrenCpuSeconds(stderr);
      resolve({ seconds, code, stderr, ...(cpu !== undefined && { cpu }) });
    });
  });
}

interface Target {
  database: ImportRun['database'];
  plants: number;
  spec: (logLevel: string) => ServerSpec;
  tokensFile: string;
  done: () => Promise<void>;
  /** The PostgreSQL processes serving the server (PostgresKeeper.backendPids). */
  backends?: (serverPid: number) => Promise<number[] | undefined>;
}

/**
 * The three imports into each size's server, both up at once, kind by kind, the sizes in
 * alternating order (small, large; large, small; ...): the imports a target compares run
 * seconds apart, not the minutes that the small store's three imports took before the
 * large one's first, in which a slow machine's speed moved enough to fail a target.
 */
async function importRuns(ctx: PhaseContext, targets: Target[], lines: number, facts: ImportFacts) {
  const servers: Server[] = [];
  try {
    for (const t of targets) {
      const name = `import ${t.database} ${t.plants}`;
      servers.push(await startServer(name, t.spec(ctx.at.logLevel), ctx.at.serverCores));
    }
    for (const [k, kind] of IMPORT_KINDS.entries()) {
      for (const i of alternating([...targets.keys()], k)) {
        await importOnce(ctx, targets[i]!, servers[i]!, kind, lines, facts);
      }
    }
  } finally {
    for (const server of servers) await stop(server);
    for (const t of targets) await t.done();
  }
}

/** One import of `kind` into `t`'s running server, recorded in `facts`. */
async function importOnce(
  ctx: PhaseContext,
  t: Target,
  server: Server,
  kind: ImportKind,
  lines: number,
  facts: ImportFacts,
): Promise<void> {
  const token = readFileSync(t.tokensFile, 'utf8').split('\n')[0]!;
  // After the first import the counter is at plants + lines: the clients' ids go above it.
  const file = join(ctx.dir, `import-${t.database}-${t.plants}-${kind.replace(/ /g, '-')}`);
  writeFileSync(file, importLines(lines, kind, t.plants + lines + 2));
  const dbBefore = cpuOf(await t.backends?.(server.pid));
  const cpu = treeCpuSeconds(server.pid);
  const machine = machineCpu();
  const harness = process.cpuUsage();
  const imported = await runImport(server, token, file, ctx.wrkCore);
  const { seconds, code, stderr } = imported;
  const serverCpu = (treeCpuSeconds(server.pid) ?? NaN) - (cpu ?? NaN);
  const after = machineCpu();
  const usage = process.cpuUsage(harness);
  const dbCpu = t.backends ? cpuSince(dbBefore, cpuOf(await t.backends(server.pid))) : 0;
  const created = createdCount(stderr);
  if (code !== 0 || created !== lines) {
    facts.problems.push(
      `${t.database} ${t.plants}, ${kind}: the import exited with ${code}, ` +
        `${created ?? 'no'} of ${lines} lines created: ${stderr.trim().slice(-200)}`,
    );
  }
  const run: ImportRun = {
    database: t.database,
    plants: t.plants,
    kind,
    lines,
    seconds,
    linesPerSecond: lines / seconds,
  };
  if (Number.isFinite(serverCpu)) run.serverCpuUs = (serverCpu / lines) * 1e6;
  if (imported.cpu !== undefined) run.cliCpuUs = (imported.cpu / lines) * 1e6;
  if (t.backends) run.dbCpuUs = (dbCpu / lines) * 1e6;
  if (
    machine !== undefined &&
    after !== undefined &&
    Number.isFinite(serverCpu) &&
    imported.cpu !== undefined
  ) {
    const known = serverCpu + dbCpu + imported.cpu + (usage.user + usage.system) / 1e6;
    run.otherCores = (after.busy - machine.busy - known) / seconds;
    if (run.otherCores > LIMITS.otherMax) {
      facts.problems.push(
        `${t.database} ${t.plants}, ${kind}: other processes used ` +
          `${run.otherCores.toFixed(2)} cores (limit ${LIMITS.otherMax})`,
      );
    }
  }
  facts.runs.push(run);
  ctx.log(
    `import, ${t.database}, ${t.plants} plants, ${kind}: ${lines} lines in ` +
      `${seconds.toFixed(2)} s, ${run.linesPerSecond.toFixed(0)} lines/s`,
  );
}

export async function importPhase(ctx: PhaseContext, lines: number): Promise<ImportFacts> {
  const facts: ImportFacts = { lines, runs: [], problems: [] };
  const sizes = [ctx.facts.smallPlants, ctx.facts.largePlants];
  const sqlite: Target[] = [];
  for (const plants of sizes) {
    const db = join(ctx.dir, `import-${plants}.db`);
    const tokensFile = join(ctx.dir, `import-${plants}.tokens`);
    await seedSqlite(db, plants, tokensFile);
    const spec = (logLevel: string): ServerSpec => ({
      kind: 'plantstore',
      db,
      durability: 'power',
      logLevel,
    });
    sqlite.push({ database: 'SQLite', plants, spec, tokensFile, done: async () => {} });
  }
  await importRuns(ctx, sqlite, lines, facts);
  const answer = await reachable(BENCH_POSTGRES_URL);
  if (answer !== true) {
    facts.problems.push(`no PostgreSQL at PLANTSTORE_BENCH_DATABASE_URL (${answer})`);
    return facts;
  }
  const postgres: Target[] = [];
  try {
    for (const plants of sizes) {
      const tokensFile = join(ctx.dir, `import-postgres-${plants}.tokens`);
      const schema = await seedSchema(BENCH_POSTGRES_URL, plants, tokensFile);
      const { spec, backends } = plantstoreOn(schema);
      postgres.push({
        database: 'PostgreSQL',
        plants,
        spec,
        tokensFile,
        done: () => schema.drop(),
        ...(backends && { backends }),
      });
    }
  } catch (error) {
    for (const t of postgres) await t.done();
    throw error;
  }
  await importRuns(ctx, postgres, lines, facts);
  return facts;
}
