/**
 * The benchmark: plantstore against a minimal Fastify app and bare node:http servers on
 * SQLite, and against a bare node:http + pg server on PostgreSQL, loaded by wrk in alternating
 * turns, with each side's CPU per request and a validity check per row.
 * bench/README.md says how to run it and what each row measures; bench/RESULTS.md holds the
 * last valid full run.
 *
 *   npm run bench [-- --quick | --help | ...]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, readdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import * as prettier from 'prettier';
import { dropUndroppedSchemas } from './data/postgres.js';
import { type BenchOptions, parseOptions, USAGE } from './harness/options.js';
import { killAll, pinSelf, ROOT } from './harness/servers.js';
import { startReasons } from './harness/validity.js';
import { findWrk } from './harness/wrk.js';
import { eventsPhase } from './phases/events.js';
import type { Facts, PhaseContext } from './phases/facts.js';
import { postgresPhase, sqlitePhase } from './phases/groups.js';
import { historyPhase } from './phases/history.js';
import { importPhase } from './phases/imports.js';
import { webhookLagPhase } from './phases/webhook-lag.js';
import { webhookPhase } from './phases/webhooks.js';
import { commitText, resultsMarkdown, type RunMeta } from './report/results.js';
import { fullPlan, selectGroups } from './rows/plan.js';
import type { Row } from './rows/rows.js';

const log = (line: string) => process.stderr.write(`${line}\n`);

/** The latest modification time of a file under `dir`. */
function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const time = entry.isDirectory() ? newest(path) : statSync(path).mtimeMs;
    latest = Math.max(latest, time);
  }
  return latest;
}

/** plantstore runs from dist/: build it when it is missing or older than src/. */
function ensureBuilt(): void {
  let built = 0;
  try {
    built = statSync(join(ROOT, 'dist', 'cli', 'main.js')).mtimeMs;
  } catch {
    // Not built yet: built stays 0.
  }
  if (built > newest(join(ROOT, 'src'))) return;
  log('dist/ is missing or older than src/: npm run build');
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (build.status !== 0) throw new Error('npm run build failed');
}

/** A directory of its own under .tmp/ for the run's databases, removed when the run ends. */
function workspace(): string {
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  const dir = mkdtempSync(join(ROOT, '.tmp', 'bench-'));
  process.on('exit', () => {
    killAll();
    rmSync(dir, { recursive: true, force: true });
  });
  // Interrupted, the phases' own cleanup never runs: the servers are killed (on exit) and
  // the PostgreSQL schemas dropped here, within a few seconds; a second signal ends at once.
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) process.exit(130);
      stopping = true;
      killAll();
      setTimeout(() => process.exit(130), 10_000);
      void dropUndroppedSchemas(log).finally(() => process.exit(130));
    });
  }
  return dir;
}

/** Pins the harness (and so wrk's parent) to core 1; why the run is invalid if it cannot. */
function placement(runReasons: string[]): boolean {
  const twoCores = cpus().length >= 2;
  if (!twoCores) runReasons.push('one CPU: wrk and the servers share it');
  const pinned = twoCores && pinSelf(1);
  log(
    pinned
      ? 'wrk and the harness on core 1, servers on core 0 (taskset)'
      : 'no pinning: taskset is missing or there is one core',
  );
  return pinned;
}

/** Both phases of the selected groups; a missing PostgreSQL is a reason the run is invalid. */
async function measure(options: BenchOptions, ctx: PhaseContext, runReasons: string[]) {
  const groups = selectGroups(fullPlan(options.connections), options.only);
  const rows: Row[] = await sqlitePhase(
    groups.filter((g) => g.phase === 'sqlite'),
    ctx,
  );
  const pg = await postgresPhase(
    groups.filter((g) => g.phase === 'postgres'),
    ctx,
  );
  if (typeof pg === 'string') {
    log(`${pg}: the PostgreSQL rows are missing`);
    runReasons.push(`${pg}: the PostgreSQL rows are missing`);
  } else rows.push(...pg);
  return rows;
}

async function main(): Promise<number> {
  const started = performance.now();
  const commit = commitText();
  const options = parseOptions(process.argv.slice(2));
  if (options === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const wrk = findWrk();
  if ('missing' in wrk) {
    log(`bench: ${wrk.missing}`);
    return 2;
  }
  const runReasons: string[] = [];
  const pinned = placement(runReasons);
  ensureBuilt();
  const { largePlants, smallPlants, rounds, turnSeconds, logLevel } = options;
  const facts: Facts = { starts: [], memory: {}, largePlants, smallPlants };
  const ctx: PhaseContext = {
    dir: workspace(),
    at: { serverCores: pinned ? '0' : `0-${cpus().length - 1}`, logLevel },
    rounds,
    turnSeconds,
    ...(pinned && { wrkCore: 1 }),
    facts,
    log,
  };
  const rows = await measure(options, ctx, runReasons);
  const phase = (name: string) =>
    options.only.length === 0 || options.only.some((part) => name.includes(part));
  if (phase('webhooks')) {
    facts.webhooks = await webhookPhase(ctx, options.quick ? 1000 : 5000);
  }
  if (phase('webhooks') || phase('webhook-lag')) {
    facts.webhookLag = await webhookLagPhase(ctx);
    runReasons.push(...facts.webhookLag.problems.map((p) => `webhook lag: ${p}`));
  }
  if (options.only.length === 0 || options.only.some((part) => 'plants-import'.includes(part))) {
    facts.imports = await importPhase(ctx, options.quick ? 2000 : 10_000);
    runReasons.push(...facts.imports.problems.map((p) => `plants import: ${p}`));
  }
  if (options.only.length === 0 || options.only.some((part) => 'deliveries-audit'.includes(part))) {
    facts.history = await historyPhase(ctx);
    runReasons.push(...facts.history.problems.map((p) => `deliveries and audit: ${p}`));
  }
  if (phase('events')) {
    facts.events = await eventsPhase(ctx);
    runReasons.push(...facts.events.problems.map((p) => `events: ${p}`));
  }
  runReasons.push(...startReasons(facts.starts));
  const args = process.argv.slice(2).join(' ');
  const meta: RunMeta = {
    command: `npm run bench${args ? ` -- ${args}` : ''}`,
    commit,
    elapsedS: (performance.now() - started) / 1000,
    wrkVersion: wrk.version,
    pinned,
    rounds,
    turnSeconds,
    logLevel,
    reasons: runReasons,
  };
  return report(rows, facts, meta, options.full);
}

/** Prints the report, keeps it in .tmp/, and writes bench/RESULTS.md from a valid full run. */
async function report(rows: Row[], facts: Facts, meta: RunMeta, full: boolean): Promise<number> {
  const file = join(ROOT, 'bench', 'RESULTS.md');
  const config = (await prettier.resolveConfig(file)) ?? {};
  const markdown = await prettier.format(resultsMarkdown(rows, facts, meta), {
    ...config,
    parser: 'markdown',
  });
  process.stdout.write(`\n${markdown}\n`);
  const valid = meta.reasons.length === 0 && rows.every((r) => r.reasons.length === 0);
  const last = join(ROOT, '.tmp', 'bench-last.md');
  writeFileSync(last, markdown);
  if (valid && full) {
    writeFileSync(file, markdown);
    log(`a valid full run: wrote bench/RESULTS.md (and ${last})`);
    return 0;
  }
  const why = valid
    ? 'not a full run (--quick, --only or other lengths)'
    : 'the run is invalid (see Validity)';
  log(`bench/RESULTS.md not written: ${why}. This report: ${last}`);
  return valid ? 0 : 1;
}

process.exitCode = await main().catch((error: unknown) => {
  log(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  return 1;
});
