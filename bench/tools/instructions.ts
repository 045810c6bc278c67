/**
 * Instructions a request, counted by valgrind's callgrind with V8 in its predictable mode:
 * the same figure (within about 0.3%) for the same code and inputs, however slow or busy
 * the machine is; about 4 minutes a server. Not a row of the benchmark (instructions are
 * not time: caches and the kernel's part are left out, and the mode compiles and collects
 * on the main thread), but an A/B of a change to a request's path that a noisy machine's
 * timings cannot show.
 *
 *   npx tsx bench/tools/instructions.ts [--servers plantstore,fastify] [--seeds 1]
 *     [--path /plants/{id}] [--requests 10000] [--warm-up 20000] [--connections 8]
 *     [--plants 10000] [--plantstore-args "..."] [--keep DIR]
 *
 * Servers: plantstore, and the yardsticks fastify (minimal Fastify), plugins (Fastify with
 * its plugins) and bare (node:http); each after the first is given as its count ÷ the
 * first's.
 *
 * Each server runs alone under callgrind on its own copy of one SQLite database (plants
 * 1..N, the benchmark's tokens); a client in this process warms it with `--warm-up`
 * requests, then callgrind counts the next `--requests` (from `callgrind_control -i on` to
 * a dump), and the count is divided by them. `{id}` in the path is a random plant id.
 * plantstore runs as the benchmark runs it (`power`, log level `info`, its log to
 * /dev/null); `--plantstore-args "..."` adds options (for an A/B of a setting).
 *
 * Another build of the same code reads the same; another code does not only by what it
 * runs: where the JIT and the collector fall moves with it, by up to 6% (HISTORY.md,
 * 2026-11-30). For an A/B, take the mean of several seeds a side: `--seeds 1,2,3` runs each
 * server once per seed and compares the means.
 */
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { seedSqlite } from '../data/seed.js';
import { argvOf, freePort, ROOT, type ServerSpec, untilHealthy } from '../harness/servers.js';

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: 'plantstore,fastify' },
    path: { type: 'string', default: '/plants/{id}' },
    requests: { type: 'string', default: '10000' },
    'warm-up': { type: 'string', default: '20000' },
    connections: { type: 'string', default: '8' },
    plants: { type: 'string', default: '10000' },
    'plantstore-args': { type: 'string', default: '' },
    /** V8's random and hash seeds, one run each: another seed, another place for the JIT. */
    seeds: { type: 'string', default: '1' },
    /** A folder to keep callgrind's files in, for callgrind_annotate. */
    keep: { type: 'string' },
  },
});
/** A whole number of at least 1, or the tool stops saying which option is wrong. */
function wholeOption(option: 'requests' | 'warm-up' | 'connections' | 'plants'): number {
  const n = Number(values[option]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${option}: a whole number of 1 or more`);
  return n;
}
const requests = wholeOption('requests');
const warmUp = wholeOption('warm-up');
const connections = wholeOption('connections');
const plants = wholeOption('plants');

/** Each server this tool can count, as the benchmark starts it on a SQLite file. */
const SPECS: Record<string, (db: string) => ServerSpec> = {
  plantstore: (db) => ({
    kind: 'plantstore',
    db,
    durability: 'power',
    logLevel: 'info',
    extraArgs: values['plantstore-args'].split(' ').filter(Boolean),
  }),
  fastify: (db) => ({ kind: 'fastify-sqlite', db }),
  plugins: (db) => ({ kind: 'fastify-plugins', db }),
  bare: (db) => ({ kind: 'bare-sqlite', db }),
};

for (const name of values.servers.split(','))
  if (SPECS[name] === undefined)
    throw new Error(`--servers: ${name} is not one of ${Object.keys(SPECS)}`);
// Said at once, not as a server that never became ready.
execFileSync('valgrind', ['--version'], { stdio: 'ignore' });

const dir = mkdtempSync(join(tmpdir(), 'plantstore-instructions-'));
const tokensFile = join(dir, 'tokens');

/** Sends `count` requests over `connections` keep-alive connections, tokens in turn. */
async function load(port: number, tokens: string[], count: number): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  let sent = 0;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const id = 1 + Math.floor(Math.random() * plants);
      const token = tokens[sent % tokens.length]!;
      sent++;
      const req = request(
        {
          port,
          agent,
          path: values.path.replace('{id}', String(id)),
          headers: { authorization: `Bearer ${token}` },
        },
        (res) => {
          if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end();
    });
  const worker = async () => {
    while (sent < count) await one();
  };
  await Promise.all(Array.from({ length: connections }, worker));
  agent.destroy();
}

/** The instructions callgrind counted in its dumps: the main thread's, and all threads'. */
function dumpedInstructions(prefix: string): { main: number; all: number } {
  let main = 0;
  let all = 0;
  for (const name of readdirSync(dir).filter((n) => n.startsWith(prefix))) {
    const text = readFileSync(join(dir, name), 'utf8');
    // The file callgrind opens at the start holds nothing counted (instrumentation was off).
    const total = Number(/^totals: (\d+)/m.exec(text)?.[1] ?? 0);
    all += total;
    if (/^thread: 1$/m.test(text)) main += total;
  }
  // callgrind_control says so on its output, not by its exit code, when it reached nothing.
  if (main === 0) throw new Error(`no dump of the main thread with ${prefix}`);
  return { main, all };
}

async function measure(
  name: string,
  turn: number,
  seed: string,
  seeded: string,
  tokens: string[],
): Promise<{ main: number; all: number }> {
  const db = join(dir, `${name}-${turn}.db`);
  copyFileSync(seeded, db);
  const port = await freePort();
  const out = join(dir, `${name}-${turn}.callgrind`);
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      '--smc-check=all',
      '--separate-threads=yes',
      `--callgrind-out-file=${out}.%p`,
      process.execPath,
      // V8 deterministic (its seeds fixed, compiling and collecting on the main thread):
      // without, the same server read 91k to 136k a request from run to run, by how soon
      // functions were optimized and where objects landed, not by the code a request runs.
      '--predictable',
      `--random-seed=${seed}`,
      `--hash-seed=${seed}`,
      ...argvOf(SPECS[name]!(db), port),
    ],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  try {
    // Under valgrind a server starts in about a minute, not the benchmark's seconds.
    await untilHealthy(name, child, `http://127.0.0.1:${port}`, 300_000);
    await load(port, tokens, warmUp);
    execFileSync('callgrind_control', ['-i', 'on', String(child.pid)], { stdio: 'ignore' });
    await load(port, tokens, requests);
    execFileSync('callgrind_control', ['-d', String(child.pid)], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['-i', 'off', String(child.pid)], { stdio: 'ignore' });
    const { main, all } = dumpedInstructions(`${name}-${turn}.callgrind`);
    const perRequest = { main: main / requests, all: all / requests };
    if (values.keep !== undefined) mkdirSync(values.keep, { recursive: true });
    if (values.keep !== undefined)
      for (const file of readdirSync(dir).filter((n) => n.startsWith(`${name}-${turn}.callgrind`)))
        copyFileSync(join(dir, file), join(values.keep, file));
    return perRequest;
  } catch (error) {
    process.stderr.write(stderr);
    throw error;
  } finally {
    child.kill('SIGKILL');
  }
}

try {
  const seeded = join(dir, 'seed.db');
  await seedSqlite(seeded, plants, tokensFile);
  const tokens = readFileSync(tokensFile, 'utf8').trim().split('\n');
  const results: [string, number][] = [];
  const count = (n: number) => Math.round(n).toLocaleString('en');
  let turn = 0;
  for (const name of values.servers.split(',')) {
    const counts: number[] = [];
    for (const seed of values.seeds.split(',')) {
      const perRequest = await measure(name, turn++, seed, seeded, tokens);
      counts.push(perRequest.all);
      console.log(
        `${name}, seed ${seed}: ${count(perRequest.all)} instructions a request ` +
          `(${count(perRequest.main)} on the main thread)`,
      );
    }
    const mean = counts.reduce((sum, n) => sum + n, 0) / counts.length;
    if (counts.length > 1) {
      const range = `${count(Math.min(...counts))} to ${count(Math.max(...counts))}`;
      console.log(`${name}: mean ${count(mean)} (${range})`);
    }
    results.push([name, mean]);
  }
  const [first, ...others] = results;
  for (const [name, perRequest] of others)
    console.log(`${name} ÷ ${first![0]}: ${(perRequest / first![1]).toFixed(3)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
