/** The tables of a run, in Markdown: results, validity, targets. Pure. */
import type { Side } from '../harness/summary.js';
import type { EventsFacts, HistoryFacts, ImportFacts, LagFacts } from '../phases/facts.js';
import { DATA_SETS } from '../rows/plan.js';
import type { Row } from '../rows/rows.js';
import { SCENARIOS } from '../rows/scenarios.js';
import { checks, type Facts, plantsText } from './targets.js';

const fmt = (n: number | undefined, digits = 0): string =>
  n !== undefined && Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '–';
const pct = (share: number | undefined): string =>
  share === undefined || !Number.isFinite(share) ? '–' : `${Math.round(share * 100)}%`;

const tableOf = (head: string[], lines: string[][]): string =>
  [head, head.map(() => '---'), ...lines].map((cells) => `| ${cells.join(' | ')} |`).join('\n');

/** The plants a row's data set holds: `1M`, or `1M + 1M client ids` (bench/data/seed.ts). */
export const plantsCell = (r: Row): string =>
  plantsText(r.plants) +
  (r.clientIds > 0 ? ` + ${plantsText(r.clientIds)} client ids above the counter` : '');

export const rowName = (r: Row): string =>
  `${SCENARIOS[r.scenario].label}, ${plantsCell(r)}, ${r.connections} conn: ${r.subject.name} ÷ ${r.yardstick.name}`;

const database = (r: Row): string =>
  DATA_SETS[r.data].database === 'postgres' ? 'PostgreSQL' : 'SQLite';

const RESULT_HEAD = [
  'scenario',
  'db',
  'plants',
  'conns',
  'subject',
  'yardstick',
  'rounds',
  'req/s subject',
  'req/s yardstick',
  'req/s bare',
  'req/s ratio',
  'CPU µs/req subject',
  'CPU µs/req yardstick',
  'CPU µs/req bare',
  'CPU ratio',
  'p50 ms subject',
  'p99 ms subject',
  'p99 ms yardstick',
  'p99 ms bare',
  'p99 ratio',
  'valid',
];

const resultCells = (r: Row): string[] => [
  SCENARIOS[r.scenario].label,
  database(r),
  plantsCell(r),
  String(r.connections),
  r.subject.name,
  r.yardstick.name,
  String(r.rounds),
  ...[r.subject.rps, r.yardstick.rps, r.beside?.rps].map((n) => fmt(n)),
  `**${fmt(r.ratios.rps, 2)}**`,
  ...[r.subject.cpuUs, r.yardstick.cpuUs, r.beside?.cpuUs].map((n) => fmt(n, 1)),
  `**${fmt(r.ratios.cpu, 2)}**`,
  ...[r.subject.p50ms, r.subject.p99ms, r.yardstick.p99ms, r.beside?.p99ms].map((n) => fmt(n, 2)),
  fmt(r.ratios.p99, 2),
  r.reasons.length === 0 ? 'valid' : '**invalid**',
];

export const resultsTable = (rows: Row[]): string => tableOf(RESULT_HEAD, rows.map(resultCells));

function validityLine(r: Row, s: Side): string[] {
  return [
    rowName(r),
    s.name,
    pct(s.serverShare),
    pct(s.wrkShare),
    fmt(s.idleCores, 2),
    fmt(s.otherCores, 2),
    s.othersText ?? '–',
    fmt(s.stealCores, 2),
    fmt(s.dbCpuUs, 1),
    String(s.errors),
  ];
}

export function validityTable(rows: Row[]): string {
  const head = [
    'row',
    'server',
    'server CPU',
    'wrk CPU',
    'idle servers (cores)',
    'other load (cores)',
    'most of it (cores)',
    'steal (cores)',
    'database CPU µs/req',
    'errors',
  ];
  const lines = rows.flatMap((r) =>
    [r.subject, r.yardstick, ...(r.beside ? [r.beside] : [])].map((s) => validityLine(r, s)),
  );
  return tableOf(head, lines);
}

export function reasonsList(rows: Row[], runReasons: string[]): string {
  const invalid = rows.filter((r) => r.reasons.length > 0);
  const lines = invalid.map((r) => `- ${rowName(r)}: ${r.reasons.join('; ')}`);
  const run = runReasons.map((reason) => `- the run: ${reason}`);
  return [...run, ...lines].join('\n') || 'Every row is valid.';
}

/** Where a missed target's profile and what would close it are kept (bench/HISTORY.md). */
export const MISSED_EXPLAINED =
  'Why each missed target misses, with the profiles, and what would close it: `bench/HISTORY.md`, "Missed targets, explained".';

export function targetsTable(rows: Row[], facts: Facts): string {
  const verdict = (met: boolean | undefined) =>
    met === undefined ? 'not measured' : met ? 'met' : '**missed**';
  const all = checks(rows, facts);
  const table = tableOf(
    ['target', 'measured', ''],
    all.map((c) => [c.target, c.measured, verdict(c.met)]),
  );
  return all.some((c) => c.met === false) ? `${table}\n\n${MISSED_EXPLAINED}` : table;
}

/** The import rows: one line per import, in the order they ran on each server. */
export function importsTable(imports: ImportFacts): string {
  const head = [
    'database',
    'plants before',
    'import',
    'lines',
    'seconds',
    'lines/s',
    'server CPU µs/line',
    'database CPU µs/line',
    'CLI CPU µs/line',
    'other load (cores)',
  ];
  const lines = imports.runs.map((r) => [
    r.database,
    plantsText(r.plants),
    r.kind,
    fmt(r.lines),
    fmt(r.seconds, 2),
    fmt(r.linesPerSecond),
    fmt(r.serverCpuUs, 1),
    fmt(r.dbCpuUs, 1),
    fmt(r.cliCpuUs, 1),
    fmt(r.otherCores, 2),
  ]);
  return tableOf(head, lines);
}

/** Deliveries and the audit trail read back, one line per measurement. */
export function historyTable(history: HistoryFacts): string {
  const head = [
    'database',
    'entries kept',
    'what',
    'p50 ms',
    'p99 ms (audit: slowest)',
    'samples',
    'other load (cores)',
  ];
  const lines = history.runs.map((r) => [
    r.database,
    plantsText(r.entries),
    r.what === 'deliveries'
      ? 'GET /webhooks/{id}/deliveries, 1 connection'
      : 'plantstore audit --plant <id>',
    fmt(r.p50ms, 2),
    fmt(r.p99ms, 2),
    fmt(r.samples),
    fmt(r.otherCores, 2),
  ]);
  return tableOf(head, lines);
}

/** A healthy endpoint's delivery lag, one line per server (phases/webhook-lag.ts). */
export function lagTable(lag: LagFacts): string {
  const head = [
    'database',
    'hung endpoints',
    'creates',
    'arrived',
    'p50 ms',
    'p99 ms',
    'other load (cores)',
  ];
  const lines = lag.runs.map((r) => [
    r.database,
    String(r.hung),
    String(r.creates),
    String(r.arrived),
    Number.isFinite(r.p50ms) ? fmt(r.p50ms, 1) : 'never',
    Number.isFinite(r.p99ms) ? fmt(r.p99ms, 1) : 'never',
    fmt(r.otherCores, 2),
  ]);
  return tableOf(head, lines);
}

/** The changes feed rows, one line per database and number of streams (phases/events.ts). */
export function eventsTable(events: EventsFacts): string {
  const head = [
    'database',
    'streams following',
    'creates/s',
    'CPU µs per create',
    'server CPU',
    'wrk + harness CPU',
    'creates/s ÷ none',
    'CPU per create: none ÷ this',
  ];
  const lines = events.runs.flatMap((r) => [
    [
      r.database,
      '0',
      fmt(r.alone.createsPerSecond),
      fmt(r.alone.cpuUsPerCreate, 1),
      pct(r.alone.serverShare),
      pct(r.alone.loadShare),
      '1',
      '1',
    ],
    ...r.costs.map((c) => [
      r.database,
      String(c.streams),
      fmt(c.createsPerSecond),
      fmt(c.cpuUsPerCreate, 1),
      pct(c.serverShare),
      pct(c.loadShare),
      fmt(c.rpsRatio, 2),
      `${fmt(c.cpuRatio, 2)} (rounds ${fmt(c.cpuRange[0], 2)} to ${fmt(c.cpuRange[1], 2)})`,
    ]),
  ]);
  const catchUp = tableOf(
    ['database', 'streams', 'events each', 'events/s through each', 'events/s in all'],
    events.runs.flatMap((r) =>
      r.catchUp.map((c) => [
        r.database,
        String(c.streams),
        fmt(c.events),
        fmt(c.perStreamPerSecond),
        fmt(c.perStreamPerSecond * c.streams),
      ]),
    ),
  );
  const lag = tableOf(
    ['database', 'creates', 'arrived', 'p50 ms', 'p99 ms', 'other load (cores)'],
    events.runs.map((r) => [
      r.database,
      String(r.lag.creates),
      String(r.lag.arrived),
      fmt(r.lag.p50ms, 1),
      fmt(r.lag.p99ms, 1),
      fmt(r.otherCores, 2),
    ]),
  );
  return `${tableOf(head, lines)}\n\n${catchUp}\n\n${lag}`;
}
