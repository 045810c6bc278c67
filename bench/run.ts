/**
 * The side-by-side benchmark of issue 3: plantstore against a bare node:http + better-sqlite3
 * reference, alternating in short turns. See bench/RESULTS.md for the method and results.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as prettier from 'prettier';
import { compare, type Kind, type Target } from './load.js';
import { parseOptions } from './options.js';
import { BENCH_POSTGRES_URL, seedPostgres } from './postgres.js';
import { type Facts, LABEL, type Row, resultsMarkdown, table, targetsTable } from './report.js';
import { ROOT, Refiller, seed } from './seed.js';
import {
  killAll,
  peakRssMb,
  pinSelf,
  type Server,
  startPlantstore,
  startReference,
  stop,
} from './servers.js';

const started = performance.now();
const opts = parseOptions(process.argv.slice(2));
const log = (line: string) => process.stderr.write(`${line}\n`);

mkdirSync(join(ROOT, '.tmp'), { recursive: true });
const dir = mkdtempSync(join(ROOT, '.tmp', 'bench-'));
const refillers: Refiller[] = [];
function cleanup(): void {
  killAll();
  for (const r of refillers.splice(0)) r.close();
  rmSync(dir, { recursive: true, force: true });
}
process.on('exit', cleanup);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => process.exit(130));
}

const pinned = pinSelf(1);
log(
  pinned
    ? 'load generator on core 1, servers on core 0 (taskset)'
    : 'taskset unavailable: no pinning',
);

const large = join(dir, 'large.db');
const small = join(dir, 'small.db');
const t = performance.now();
const tokens = new Map([
  [large, seed(large, opts.largePlants)],
  [small, seed(small, opts.smallPlants)],
]);
log(
  `seeded ${opts.largePlants} + ${opts.smallPlants} plants in ${((performance.now() - t) / 1000).toFixed(1)} s`,
);

let copies = 0;
function copyOf(seeded: string): string {
  const file = join(dir, `copy-${++copies}.db`);
  cpSync(seeded, file);
  return file;
}

function target(server: Server, db: string, seeded: string, plants: number): Target {
  const token = tokens.get(seeded)!;
  const refiller = new Refiller(db);
  refillers.push(refiller);
  return { url: server.url, token, plants, refiller, cursor: 0 };
}

const pairs = Math.max(1, Math.round((opts.duration * 1000) / opts.turnMs));
const rows: Row[] = [];
async function measure(kind: Kind, a: [string, Target], b: [string, Target], connections: number) {
  const result = await compare(kind, a[1], b[1], connections, pairs, opts.turnMs);
  const row = { kind, plants: a[1].plants, connections, a: a[0], b: b[0], result };
  rows.push(row);
  log(
    `${LABEL[kind]} ${row.plants} plants, ${connections} conns, ${a[0]} / ${b[0]}: ` +
      `${result.ratio.toFixed(2)} (${result.a.rps.toFixed(0)} / ${result.b.rps.toFixed(0)} req/s)`,
  );
}

/** Starts A (plantstore or a second reference) and the reference on copies of `seeded`. */
async function phase(
  seeded: string,
  plants: number,
  a: { name: string; durability?: 'power' | 'process'; logLevel?: string },
  body: (a: [string, Target], b: [string, Target]) => Promise<void>,
): Promise<{ a: Server; b: Server }> {
  const aDb = copyOf(seeded);
  const bDb = copyOf(seeded);
  const aServer =
    a.durability === undefined
      ? await startReference(a.name, aDb, '0')
      : await startPlantstore(a.name, {
          db: aDb,
          durability: a.durability,
          logLevel: a.logLevel ?? opts.logLevel,
          cores: '0',
        });
  const bServer = await startReference('reference', bDb, '0');
  await body(
    [a.name, target(aServer, aDb, seeded, plants)],
    ['reference', target(bServer, bDb, seeded, plants)],
  );
  return { a: aServer, b: bServer };
}

const main = `plantstore ${opts.durability}`;
const kinds: Kind[] = ['delete', 'getOne', 'list', 'post'];
const big = await phase(
  large,
  opts.largePlants,
  { name: main, durability: opts.durability },
  async (a, b) => {
    for (const kind of kinds) for (const c of opts.connections) await measure(kind, a, b, c);
  },
);
const facts: Facts = {
  pinned,
  logLevel: opts.logLevel,
  quick: opts.quick,
  turnMs: opts.turnMs,
  duration: opts.duration,
  largePlants: opts.largePlants,
  readyMs: big.a.readyMs,
  rssMb: { plantstore: peakRssMb(big.a), reference: peakRssMb(big.b) },
  elapsedS: 0,
};
await Promise.all([stop(big.a), stop(big.b)]);

const servers: Server[] = [];
const keep = ({ a, b }: { a: Server; b: Server }) => servers.push(a, b);
keep(
  await phase(
    small,
    opts.smallPlants,
    { name: main, durability: opts.durability },
    async (a, b) => {
      for (const kind of ['delete', 'getOne'] as const)
        for (const c of opts.connections) await measure(kind, a, b, c);
    },
  ),
);
const other = opts.durability === 'power' ? 'process' : 'power';
keep(
  await phase(
    large,
    opts.largePlants,
    { name: `plantstore ${other}`, durability: other },
    async (a, b) => {
      for (const kind of ['delete', 'post'] as const) await measure(kind, a, b, 64);
    },
  ),
);
if (opts.logLevel !== 'silent') {
  keep(
    await phase(
      large,
      opts.largePlants,
      {
        name: `plantstore ${opts.durability} silent`,
        durability: opts.durability,
        logLevel: 'silent',
      },
      async (a, b) => {
        for (const kind of ['getOne', 'list'] as const) await measure(kind, a, b, 64);
      },
    ),
  );
}
// --workers 2 against 1: both plantstore, both free to use both cores (which the load
// generator shares), since two workers on one pinned core could not show anything.
{
  const one = copyOf(large);
  const two = copyOf(large);
  const common = { durability: opts.durability, logLevel: opts.logLevel, cores: '0,1' };
  const b = await startPlantstore('plantstore 1 worker', { ...common, db: one });
  const a = await startPlantstore('plantstore 2 workers', { ...common, db: two, workers: 2 });
  servers.push(a, b);
  const ta = target(a, two, large, opts.largePlants);
  const tb = target(b, one, large, opts.largePlants);
  for (const kind of ['getOne', 'list', 'post'] as const) {
    await measure(kind, [a.name, ta], [b.name, tb], 64);
  }
}

// PostgreSQL against SQLite, where a PostgreSQL is reachable.
const seededPg = await seedPostgres(BENCH_POSTGRES_URL, opts.largePlants);
if (seededPg === undefined) {
  log(`no PostgreSQL at ${BENCH_POSTGRES_URL}: PostgreSQL rows skipped`);
} else {
  try {
    const common = { durability: opts.durability, logLevel: opts.logLevel, cores: '0' };
    const sqliteDb = copyOf(large);
    const a = await startPlantstore('plantstore postgres', {
      ...common,
      databaseUrl: seededPg.url,
    });
    const b = await startPlantstore('plantstore sqlite', { ...common, db: sqliteDb });
    servers.push(a, b);
    const ta: Target = { url: a.url, token: seededPg.token, plants: opts.largePlants, cursor: 0 };
    const tb = target(b, sqliteDb, large, opts.largePlants);
    for (const kind of ['getOne', 'list', 'post'] as const) {
      await measure(kind, [a.name, ta], [b.name, tb], 64);
    }
    await Promise.all([stop(a), stop(b)]);
  } finally {
    await seededPg.drop();
  }
}

keep(
  await phase(large, opts.largePlants, { name: 'reference' }, async (a, b) => {
    await measure('getOne', a, b, 64);
  }),
);
await Promise.all(servers.map(stop));

facts.elapsedS = (performance.now() - started) / 1000;
const resultsFile = join(ROOT, 'bench', 'RESULTS.md');
const prettierConfig = (await prettier.resolveConfig(resultsFile)) ?? {};
const markdown = resultsMarkdown(rows, facts);
writeFileSync(
  resultsFile,
  await prettier.format(markdown, { ...prettierConfig, parser: 'markdown' }),
);
process.stdout.write(`${table(rows)}\n\n${targetsTable(rows, facts)}\n\n`);
process.stdout.write(`wrote bench/RESULTS.md (${facts.elapsedS.toFixed(0)} s)\n`);
