import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import type { Comparison, Kind } from './load.js';

export const LABEL: Record<Kind, string> = {
  delete: 'DELETE /plants/{id}',
  getOne: 'GET /plants/{id}',
  list: 'GET /plants?limit=100',
  post: 'POST /plants',
};

export interface Row {
  kind: Kind;
  plants: number;
  connections: number;
  /** What side A is: plantstore with a durability, or the reference (self-check). */
  a: string;
  b: string;
  result: Comparison;
}

export interface Facts {
  pinned: boolean;
  logLevel: string;
  quick: boolean;
  turnMs: number;
  duration: number;
  largePlants: number;
  readyMs: number;
  rssMb: { plantstore?: number; reference?: number };
  elapsedS: number;
}

const fmt = (n: number, digits = 0): string =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : 'n/a';
const plantsText = (n: number): string => (n >= 1e6 ? `${n / 1e6}M` : `${n / 1e3}k`);

export function table(rows: Row[]): string {
  const head =
    '| scenario | plants | conns | A | B | pairs | ratio A/B | A req/s | B req/s | A p50 ms | B p50 ms | A p99 ms | B p99 ms | p99 A/B | errors A/B |';
  const lines = rows.map(({ kind, plants, connections, a, b, result: r }) =>
    [
      LABEL[kind],
      plantsText(plants),
      connections,
      a,
      b,
      r.pairs,
      `**${fmt(r.ratio, 2)}**`,
      fmt(r.a.rps),
      fmt(r.b.rps),
      fmt(r.a.p50, 2),
      fmt(r.b.p50, 2),
      fmt(r.a.p99, 2),
      fmt(r.b.p99, 2),
      fmt(r.a.p99 / r.b.p99, 2),
      `${r.a.errors}/${r.b.errors}`,
    ].join(' | '),
  );
  return [head, `|${'---|'.repeat(15)}`, ...lines.map((l) => `| ${l} |`)].join('\n');
}

interface Check {
  target: string;
  measured: string;
  met: boolean;
}

function checks(rows: Row[], facts: Facts): Check[] {
  const out: Check[] = [];
  const find = (kind: Kind, a: string, plants: number, connections = 64) =>
    rows.find(
      (r) => r.kind === kind && r.a === a && r.plants === plants && r.connections === connections,
    );
  const large = facts.largePlants;
  const ratio = (kind: Kind, a: string, goal: number, what: string) => {
    const row = find(kind, a, large);
    if (row)
      out.push({
        target: `${what} ${LABEL[kind]} ≥ ${goal}× reference`,
        measured: `${fmt(row.result.ratio, 2)}×`,
        met: row.result.ratio >= goal,
      });
  };
  ratio('getOne', 'plantstore power', 0.9, 'read');
  ratio('list', 'plantstore power', 0.9, 'read');
  ratio('delete', 'plantstore power', 0.8, 'power write');
  ratio('post', 'plantstore power', 0.8, 'power write');
  ratio('delete', 'plantstore process', 0.9, 'process write');
  ratio('post', 'plantstore process', 0.9, 'process write');
  const againstReference = (r: Row) =>
    r.connections === 64 && r.a.startsWith('plantstore') && r.b === 'reference';
  for (const row of rows.filter(againstReference)) {
    const p99 = row.result.a.p99 / row.result.b.p99;
    out.push({
      target: `p99 ≤ 1.5× reference: ${LABEL[row.kind]}, ${plantsText(row.plants)}, ${row.a}`,
      measured: `${fmt(row.result.a.p99, 2)} vs ${fmt(row.result.b.p99, 2)} ms = ${fmt(p99, 2)}×`,
      met: p99 <= 1.5,
    });
  }
  for (const kind of ['delete', 'getOne'] as const) {
    const big = find(kind, 'plantstore power', large);
    const small = find(kind, 'plantstore power', 10_000);
    if (!big || !small) continue;
    // Judged on the ratios to the reference, which the machine's drift between the two
    // phases cancels out of; the raw req/s are shown for context.
    const rel = big.result.ratio / small.result.ratio;
    out.push({
      target: `${LABEL[kind]} ${plantsText(large)} within 15% of 10k (ratio to reference)`,
      measured: `${fmt(big.result.ratio, 2)} vs ${fmt(small.result.ratio, 2)} = ${fmt(rel, 2)}× (plantstore req/s ${fmt(big.result.a.rps)} vs ${fmt(small.result.a.rps)}; reference ${fmt(big.result.b.rps)} vs ${fmt(small.result.b.rps)})`,
      met: Math.abs(rel - 1) <= 0.15,
    });
  }
  const rss = facts.rssMb.plantstore;
  if (rss !== undefined) {
    out.push({
      target: 'peak RSS under load ≤ 150 MB',
      measured: `${fmt(rss)} MB (reference ${fmt(facts.rssMb.reference ?? Number.NaN)} MB)`,
      met: rss <= 150,
    });
  }
  out.push({
    target: `start to /healthz 200 ≤ 1 s on an existing ${plantsText(large)}-plant database`,
    measured: `${fmt(facts.readyMs)} ms`,
    met: facts.readyMs <= 1000,
  });
  const self = rows.find((r) => r.a === r.b);
  if (self) {
    out.push({
      target: 'self-check: reference ÷ reference = 1.00 ± 0.05',
      measured: `${fmt(self.result.ratio, 2)}`,
      met: Math.abs(self.result.ratio - 1) <= 0.05,
    });
  }
  return out;
}

export function targetsTable(rows: Row[], facts: Facts): string {
  const lines = checks(rows, facts).map(
    (c) => `| ${c.target} | ${c.measured} | ${c.met ? 'met' : '**missed**'} |`,
  );
  return ['| target | measured | |', '|---|---|---|', ...lines].join('\n');
}

function cpuModel(): string {
  try {
    return /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

// `nproc` would count only the core this (pinned) process may use; count them all.
const nproc = (): number => cpus().length;

export function resultsMarkdown(rows: Row[], facts: Facts): string {
  const pinning = facts.pinned
    ? 'the load generator (this process, autocannon as a library) pinned to core 1 and every server to core 0 with `taskset`'
    : '`taskset` unavailable: no pinning, the OS schedules the load generator and the servers freely';
  return `# Benchmark results

Generated by \`npm run bench${facts.quick ? ' -- --quick' : ''}\` (${fmt(facts.elapsedS)} s).

- Machine: ${nproc()} CPUs, ${cpuModel()}
- Node ${process.version}, ${process.platform} ${process.arch}
- Date: ${new Date().toISOString()}
- Pinning: ${pinning}.

## Method

Both servers are up side by side, each on its own copy of a seeded database (plants 1..N,
one in four tagged). The load alternates between them in turns of ${facts.turnMs} ms:
A B, B A, A B, ... (one warm-up turn each first, not counted), about ${fmt(facts.duration)} s of
load per server and case. Each pair gives a ratio A/B of requests per second; the table
quotes the median ratio, and the medians over turns of each side's req/s, p50 and p99
latency (measured per response by autocannon's clock). Errors are responses with another
status than the expected one (204, 200, 200, 201), socket errors and timeouts.

- DELETE walks distinct existing ids (each server its own cursor over its own copy; a turn
  walks at most half the table); the ids a turn deleted are put back between turns, outside
  the measured time, so the table keeps its size. GET one picks random existing ids.
- A is plantstore with every feature on (\`--log-level ${facts.logLevel}\`: one log line per
  request, to /dev/null) and the durability named; the rows marked "silent" run it with
  \`--log-level silent\`, to show what the request log costs. B is the bare reference
  (\`bench/reference-server.ts\`: node:http + better-sqlite3, WAL, synchronous=NORMAL, one
  autocommit transaction per request, the token looked up by its SHA-256 hash on every request).
- The self-check row measures the reference against a second reference instance.
- \`plantstore 2 workers\` / \`plantstore 1 worker\`: \`serve --workers 2\` against one process,
  both on copies of the SQLite database and both allowed on both cores (\`taskset -c 0,1\`),
  which the load generator shares: on a 2-core machine this shows the cost and gain of
  workers, not what they give on a machine with cores to spare.
- \`plantstore postgres\` / \`plantstore sqlite\`: the same plantstore on PostgreSQL (the local
  server, in a schema of its own, seeded alike; PostgreSQL itself is not pinned) against
  SQLite. Skipped when no PostgreSQL is reachable.
- Peak RSS is VmHWM from /proc at the end of the ${plantsText(facts.largePlants)} run; start to ready
  is from spawn to the first \`/healthz\` 200, on the existing ${plantsText(facts.largePlants)}-plant database.

## Results

${table(rows)}

## Targets (64 connections)

${targetsTable(rows, facts)}
`;
}
