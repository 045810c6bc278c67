/**
 * The two phases of wrk groups: the SQLite servers (all up together, loaded in turn), then the
 * PostgreSQL ones. Each seeds what its groups need, starts their contenders, runs the groups
 * and stops everything it started. A contender with webhook endpoints subscribed starts just
 * before its first group, not with the others: its endpoints' attempts wait at most 5 minutes
 * (endpointArgs), and a full run's SQLite phase lasts about 20 minutes: started with the
 * others, its 1,000 attempts would time out and begin again, all at once, several times
 * before and perhaps during its group, where they are meant to stay open through it.
 */
import { join } from 'node:path';
import { attemptsOpen, closeBlackHole, openAttempts } from '../data/endpoints.js';
import { BENCH_POSTGRES_URL, reachable, seedSchema, type SeededSchema } from '../data/postgres.js';
import { seedSqlite } from '../data/seed.js';
import { statusMb } from '../harness/cpu.js';
import { fsyncP50ms } from '../harness/fsync.js';
import { runGroup } from '../harness/group.js';
import { stop } from '../harness/servers.js';
import type { Contender } from '../harness/turn.js';
import {
  CONTENDERS,
  type ContenderName,
  DATA_SETS,
  type DataSet,
  type GroupPlan,
} from '../rows/plan.js';
import { type GroupResult, rowsOf, type Row } from '../rows/rows.js';
import { SCENARIOS } from '../rows/scenarios.js';
import {
  copyDatabase,
  type SqliteData,
  startPostgresContender,
  startSqliteContender,
} from './contenders.js';
import type { Facts, PhaseContext } from './facts.js';

/** The plants 1..N of each data set. */
const plantsOf = (facts: Facts): Record<DataSet, number> =>
  Object.fromEntries(
    Object.entries(DATA_SETS).map(([key, set]) => [
      key,
      set.size === 'large' ? facts.largePlants : facts.smallPlants,
    ]),
  ) as Record<DataSet, number>;

/** The plants more of each data set whose ids clients chose above the counter. */
const clientIdsOf = (facts: Facts): Record<DataSet, number> =>
  Object.fromEntries(
    Object.entries(DATA_SETS).map(([key, set]) => [key, set.clientIds ? facts.largePlants : 0]),
  ) as Record<DataSet, number>;

const contendersOf = (groups: GroupPlan[]): ContenderName[] => [
  ...new Set(groups.flatMap((g) => g.contenders)),
];

/** The webhook endpoints a contender has subscribed; those with any start late (see the top). */
function endpointsOf(name: ContenderName): number {
  const { role } = CONTENDERS[name];
  return 'endpoints' in role ? role.endpoints : 0;
}

/** Starts a contender, for `live`. */
type Starter = (name: ContenderName) => Promise<Contender>;

/** How long a late contender's endpoints may take to open their attempts. */
const ATTEMPTS_OPEN_MS = 60_000;

/** Starts a late contender, and waits until each of its endpoints holds its attempt open. */
async function startLate(name: ContenderName, start: Starter, ctx: PhaseContext) {
  const before = openAttempts();
  const contender = await start(name);
  const endpoints = endpointsOf(name);
  const waited = performance.now();
  const open = (await attemptsOpen(before + endpoints, ATTEMPTS_OPEN_MS)) - before;
  const seconds = ((performance.now() - waited) / 1000).toFixed(1);
  ctx.log(`${name}: ${open} of ${endpoints} attempts open, ${seconds} s after its start`);
  return contender;
}

/**
 * Warm-up turns of a server in its first group (one in the others): with a single 1 s turn
 * before it, the first group's self-check read 1.05 (GET one) and 1.12 (DELETE, when it ran
 * first), a server's code still being optimised (bench/HISTORY.md, "Reads before writes").
 */
const FIRST_WARM_UPS = 3;

/** Starts the contenders (those with endpoints at their first group), runs the groups. */
async function runGroups(
  groups: GroupPlan[],
  live: Map<string, Contender>,
  start: Starter,
  ctx: PhaseContext,
): Promise<Row[]> {
  const rows: Row[] = [];
  const sizes = { plants: plantsOf(ctx.facts), clientIds: clientIdsOf(ctx.facts) };
  // The contenders that have run a group: warm since.
  const served = new Set<string>();
  for (const name of contendersOf(groups)) {
    if (endpointsOf(name) === 0) live.set(name, await start(name));
  }
  for (const plan of groups) {
    for (const name of plan.contenders) {
      if (!live.has(name)) live.set(name, await startLate(name, start, ctx));
    }
    if (plan.connections === 1 && ctx.facts.fsyncP50ms === undefined) {
      ctx.facts.fsyncP50ms = fsyncP50ms(ctx.dir);
      ctx.log(
        `fsync yardstick: p50 ${ctx.facts.fsyncP50ms.toFixed(3)} ms (4 KiB append + fdatasync)`,
      );
    }
    const contenders = plan.contenders.map((name) => live.get(name)!);
    const group = { ...plan, scenario: SCENARIOS[plan.scenario] };
    const turns = await runGroup(group, contenders, {
      rounds: ctx.rounds,
      seconds: ctx.turnSeconds,
      warmUps: (c) => (served.has(c.name) ? 1 : FIRST_WARM_UPS),
      ...(ctx.wrkCore !== undefined && { wrkCore: ctx.wrkCore }),
      serverPids: [...live.values()].map((c) => c.server.pid),
      log: ctx.log,
    });
    for (const name of plan.contenders) served.add(name);
    const result: GroupResult = { plan, ...turns };
    for (const row of rowsOf(result, sizes)) {
      rows.push(row);
      ctx.log(progressLine(row));
    }
  }
  return rows;
}

function progressLine(r: Row): string {
  const figures =
    `req/s ${r.subject.rps.toFixed(0)} vs ${r.yardstick.rps.toFixed(0)} (${r.ratios.rps.toFixed(2)}), ` +
    `CPU ${r.subject.cpuUs.toFixed(1)} vs ${r.yardstick.cpuUs.toFixed(1)} µs (${r.ratios.cpu.toFixed(2)}), ` +
    `p99 ${r.ratios.p99.toFixed(2)}`;
  const verdict = r.reasons.length === 0 ? 'valid' : `INVALID: ${r.reasons.join('; ')}`;
  return `${r.group} ${r.subject.name} ÷ ${r.yardstick.name}: ${figures} — ${verdict}`;
}

/** The memory of the plantstore servers among `live`, into the facts. */
function recordMemory(live: Map<string, Contender>, facts: Facts): void {
  for (const c of live.values()) {
    if (c.role.kind !== 'plantstore') continue;
    const pid = c.server.pid;
    const peakMb = statusMb(pid, 'VmHWM');
    if (peakMb === undefined) continue;
    const own = Math.max(c.ownPeakMb ?? 0, statusMb(pid, 'RssAnon') ?? 0);
    const fileMb = statusMb(pid, 'RssFile');
    facts.memory[c.name] = {
      peakMb,
      ...(own > 0 && { ownPeakMb: own }),
      ...(fileMb !== undefined && { fileMb }),
    };
  }
}

async function stopAll(live: Map<string, Contender>): Promise<void> {
  // The attempts waiting on the endpoints' address fail at once, so no server waits for them.
  await closeBlackHole();
  await Promise.all([...live.values()].map((c) => stop(c.server)));
  for (const c of live.values()) await c.keeper.close();
}

/** The SQLite data sets the contenders of `names` need, seeded in `ctx.dir`. */
async function seedSets(names: ContenderName[], ctx: PhaseContext) {
  const plants = plantsOf(ctx.facts);
  const clientIds = clientIdsOf(ctx.facts);
  const sets = new Map<DataSet, SqliteData>();
  for (const key of new Set(names.map((n) => CONTENDERS[n].data))) {
    const set = {
      plants: plants[key],
      clientIds: clientIds[key],
      file: join(ctx.dir, `${key}.db`),
      tokensFile: join(ctx.dir, `${key}.tokens`),
    };
    const started = performance.now();
    await seedSqlite(set.file, set.plants, set.tokensFile, set.clientIds);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const more = set.clientIds > 0 ? ` and ${set.clientIds} with client ids` : '';
    ctx.log(`seeded ${key}: ${set.plants} plants${more} in ${seconds} s`);
    sets.set(key, set);
  }
  return sets;
}

export async function sqlitePhase(groups: GroupPlan[], ctx: PhaseContext): Promise<Row[]> {
  if (groups.length === 0) return [];
  const names = contendersOf(groups);
  const sets = await seedSets(names, ctx);
  const live = new Map<string, Contender>();
  const start: Starter = async (name) => {
    const set = sets.get(CONTENDERS[name].data)!;
    const data = { ...set, file: copyDatabase(set.file, ctx.dir, name) };
    // Start to ready is measured on the large database, three starts, before any load.
    const starts = name === 'plantstore power' ? 3 : 1;
    const started = await startSqliteContender(name, data, ctx.at, starts);
    if (starts > 1) ctx.facts.starts = started.starts;
    return started.contender;
  };
  try {
    const rows = await runGroups(groups, live, start, ctx);
    recordMemory(live, ctx.facts);
    return rows;
  } finally {
    await stopAll(live);
  }
}

/** The PostgreSQL groups; none (and a line saying why) when no PostgreSQL answers. */
export async function postgresPhase(
  groups: GroupPlan[],
  ctx: PhaseContext,
): Promise<Row[] | string> {
  if (groups.length === 0) return [];
  const answer = await reachable(BENCH_POSTGRES_URL);
  if (answer !== true) return `no PostgreSQL at PLANTSTORE_BENCH_DATABASE_URL (${answer})`;
  const live = new Map<string, Contender>();
  const schemas: SeededSchema[] = [];
  const plants = plantsOf(ctx.facts);
  const clientIds = clientIdsOf(ctx.facts);
  const start: Starter = async (name) => {
    const started = performance.now();
    const tokensFile = join(ctx.dir, `postgres-${schemas.length}.tokens`);
    const { data: key, role } = CONTENDERS[name];
    const schema = await seedSchema(BENCH_POSTGRES_URL, plants[key], tokensFile, {
      clientIds: clientIds[key],
      sequenceAboveAll: role.kind !== 'plantstore',
    });
    schemas.push(schema);
    ctx.log(
      `seeded a PostgreSQL schema (${key}) for ${name} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    const data = { tokensFile, plants: plants[key] };
    return startPostgresContender(name, schema, data, ctx.at);
  };
  try {
    const rows = await runGroups(groups, live, start, ctx);
    recordMemory(live, ctx.facts);
    return rows;
  } finally {
    await stopAll(live);
    for (const schema of schemas) await schema.drop();
  }
}
