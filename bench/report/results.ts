/** The whole report of a run: what ran where, how, and the tables (bench/RESULTS.md). */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { TOKEN_COUNT } from '../data/seed.js';
import { CPU_SOURCE } from '../harness/cpu.js';
import { ROOT } from '../harness/servers.js';
import { LIMITS } from '../harness/validity.js';
import type { Row } from '../rows/rows.js';
import {
  historyTable,
  importsTable,
  eventsTable,
  lagTable,
  reasonsList,
  resultsTable,
  targetsTable,
  validityTable,
} from './tables.js';
import { plantsText, type Facts } from './targets.js';

export interface RunMeta {
  command: string;
  /** The commit measured (commitText), read when the run started: src/ may change during it. */
  commit: string;
  elapsedS: number;
  wrkVersion: string;
  pinned: boolean;
  rounds: number;
  turnSeconds: number;
  logLevel: string;
  /** Why the run as a whole is invalid (besides its rows). */
  reasons: string[];
}

function cpuModel(): string {
  try {
    const text = readFileSync('/proc/cpuinfo', 'utf8');
    return /^model name\s*:\s*(.+)$/m.exec(text)?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** The commit measured, and whether the code differs from it. */
export function commitText(): string {
  try {
    const git = (...args: string[]) =>
      execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty =
      git('status', '--porcelain', '--', 'src', 'migrations', 'bin', 'package.json') !== '';
    return `${git('rev-parse', '--short', 'HEAD')}${dirty ? ' with uncommitted changes to the server' : ''}`;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

function methodText(meta: RunMeta, facts: Facts): string {
  const pinning = meta.pinned
    ? 'wrk (one thread) and this harness on core 1, every server on core 0 (`taskset`)'
    : 'none: `taskset` is missing or the machine has one core, so the OS places wrk and the servers';
  return `- Pinning: ${pinning}. PostgreSQL is the machine's own server, not pinned.
- Load: \`${meta.wrkVersion}\`, one thread, ${TOKEN_COUNT} tokens taken in turn (one a request, so no
  token reaches plantstore's default rate limit), bench/harness/load.lua.
- Turns of ${meta.turnSeconds} s; per group one warm-up turn per server (three in its first group; not counted), then ${meta.rounds}
  rounds, each loading every server of the group once, in alternating order (A B C, C B A, ...).
  Ratios are the median over rounds of the ratio within a round (the targets also give the lowest
  and highest round); other figures are medians over turns.
- plantstore runs with every feature on and its default settings (log level \`${meta.logLevel}\`,
  the request log to /dev/null); "power" is its default durability, "process" is \`--durability process\`.
  The servers with endpoints subscribed (at an address that takes connections and never answers)
  start just before their group and wait 300 s for an attempt instead of 15 s, so that each
  endpoint holds one open attempt through the group rather than beginning another every 15 s.
- Yardsticks (bench/yardsticks/): \`fastify\` a minimal Fastify 5 app, \`bare\` node:http, both on
  better-sqlite3 with WAL, synchronous=NORMAL and the file memory-mapped (as plantstore); \`bare postgres\` node:http + pg (pool of 10, named
  prepared statements, one statement per request). All check the token in memory.
- Server CPU is user + system time of the server process and its children, from ${CPU_SOURCE}, read
  before and after each turn, divided by the answered requests. wrk's CPU is its own (\`os.clock()\`).
  Database CPU is that of the PostgreSQL backends serving the server's connections.
- Each server has its own copy of the data (plants 1..N, one in four tagged). DELETE walks distinct
  ids; after each turn the deleted plants are put back and created ones removed, outside the
  measured time. ${plantsText(facts.smallPlants)} rows have no DELETE: a turn would walk the whole table.
- Every POST creates without an id: the server assigns it. Rows on "${plantsText(facts.largePlants)} + ${plantsText(facts.largePlants)} client ids
  above the counter" have as many plants again whose ids clients chose, every other id above the
  server's counter, recorded as plantstore records them (runs on SQLite, plant_ids_taken on
  PostgreSQL): every other server-assigned id meets one to skip. Their yardsticks assign ids above
  the largest (AUTOINCREMENT; the sequence set there), as an application without client ids would.
- A row is **invalid** when, in the median of its turns, wrk used more than ${LIMITS.wrkMax * 100}% of its core,
  a server that should be CPU-bound (at 64 connections; not a power-durable write, not a SQLite yardstick's write, not PostgreSQL)
  used less than ${LIMITS.serverMin * 100}% of its own, other processes used more than ${LIMITS.otherMax} cores or the
  hypervisor took more than ${LIMITS.stealMax}, when any request failed or got another status, or when the
  servers answered the probe differently. The run is invalid when a row is, or when the self-check
  (bare against a second bare) is off 1 by more than ${LIMITS.selfCheck} in req/s or CPU.`;
}

function importsSection(facts: Facts): string {
  return `## plants import

\`plantstore plants import FILE\` (the CLI, its default concurrency of 16) into a plantstore server
(SQLite with power durability, or PostgreSQL) on fresh data of the size given, timed from the
CLI's start to its exit. Each server imports three files in turn: lines without ids; lines with
ids, every other id above the server's counter; lines without ids again, which meet a taken id
every other create. The two sizes' servers run side by side and import kind by kind, the sizes
in alternating order, so that the imports compared run seconds apart. One import of each, no
rounds. The run is invalid when an import did not
create every line, or when other processes used more than ${LIMITS.otherMax} cores during it (the CPU of
the server, its PostgreSQL backends, the CLI and this harness is known).

${importsTable(facts.imports!)}

`;
}

function historySection(facts: Facts): string {
  return `## Deliveries and the audit trail

A plantstore server (SQLite with power durability, or PostgreSQL) with as many webhook messages
kept for one endpoint (each delivered in one attempt) and audit entries (one create per plant) as
plants, written straight to the database, one server on each size: \`GET /webhooks/{id}/deliveries\`
(the first page) by wrk at one connection, a warm-up turn each, then ${facts.history!.rounds}
rounds of one turn on each size in alternating order (small, large; large, small; ...);
\`plantstore audit --plant <id>\` for a plant in the middle, the whole command, one run on each
size in alternating order, 6 pairs after one not counted. p50 and p99 are medians over the turns;
the ratio of the targets is the median of the rounds' ratios (of the pairs' for the audit). The
run is invalid when a request failed, or
when other processes used more than ${LIMITS.otherMax} cores meanwhile (the server's PostgreSQL
backends are known, and the audit command's own backend by the CPU of the backends that ended meanwhile).

${historyTable(facts.history!)}

`;
}

function lagSection(facts: Facts): string {
  const lag = facts.webhookLag!;
  return `## Webhook delivery lag beside hung endpoints

A fresh plantstore server (SQLite with power durability, or PostgreSQL) with its default webhook
settings (15 s timeout, 64 attempts in flight) and one endpoint answering 204 at once, alone or
with hung endpoints beside it (each takes the connection and never answers), all subscribed to
\`plant.created\`. After one create waited for (and an attempt hanging at every hung endpoint),
${lag.creates} creates, one every ${lag.paceMs} ms; each lag is from the create's 201 at the client to
its message's arrival at the healthy endpoint; p50 and p99 by nearest rank (the p99 of 40 is
the slowest), a message not there
${lag.waitMs / 1000} s after the last create counted as never. The run is invalid when other
processes used more than ${LIMITS.otherMax} cores meanwhile (the server's, its PostgreSQL
backends' and this harness's CPU is known).

${lagTable(lag)}

`;
}

function eventsSection(facts: Facts): string {
  const events = facts.events!;
  return `## The changes feed

A fresh plantstore server (SQLite with power durability, or PostgreSQL) with its defaults. wrk
creates (64 connections, no id) for ${events.turnSeconds} s turns with no stream open, with 1 stream and
with ${events.streams} streams following from the head of the log, in alternating order over ${events.rounds}
rounds; each turn's CPU is the server's (and its PostgreSQL backends') from before the load until
every stream has the turn's last event, so it holds the sending. Ratios are the median of the
rounds' ratios. Then streams opened a few thousand events back, timed until each has them all;
then ${events.runs[0]?.lag.creates ?? 0} creates one every ${events.lagPaceMs} ms and the lag from each 201 at the
client to its event on one stream. The streams are read on the harness's core. The run is
invalid when other processes used more than ${LIMITS.otherMax} cores meanwhile, or when in a turn wrk
and the harness used more than ${LIMITS.wrkMax * 100}% of their core (the load side, not the server,
may have set the pace; a power-durable write waits for fsync, so the server is not expected busy).

${eventsTable(events)}

`;
}

export function resultsMarkdown(rows: Row[], facts: Facts, meta: RunMeta): string {
  return `# Benchmark results

Generated by \`${meta.command}\` in ${meta.elapsedS.toFixed(0)} s, on commit ${meta.commit}.

- Machine: ${cpus().length} CPUs, ${cpuModel()}; Node ${process.version}, ${process.platform} ${process.arch}
- Date: ${new Date().toISOString()}

## Method

${methodText(meta, facts)}

## Results

${resultsTable(rows)}

${facts.webhookLag === undefined ? '' : lagSection(facts)}${facts.imports === undefined ? '' : importsSection(facts)}${facts.history === undefined ? '' : historySection(facts)}${facts.events === undefined ? '' : eventsSection(facts)}## Targets

${targetsTable(rows, facts)}

## Validity

${reasonsList(rows, meta.reasons)}

${validityTable(rows)}
`;
}
