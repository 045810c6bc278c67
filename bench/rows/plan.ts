/**
 * The run's plan: which servers (contenders) run, which groups of turns load them, and which
 * rows each group gives. A group alternates its contenders turn by turn (A B C, C B A, ...),
 * so every row's subject and yardstick are measured in the same rounds. To add a row, add a
 * group here (and its scenario to scenarios.ts beside this file).
 */
import type { Role } from '../harness/turn.js';
import { SCENARIOS, type ScenarioId } from './scenarios.js';

/** Which seeded data a contender gets a copy of. */
export type DataSet =
  | 'sqlite-large'
  | 'sqlite-small'
  | 'sqlite-client-ids'
  | 'postgres'
  | 'postgres-small'
  | 'postgres-client-ids';

/**
 * What a data set holds: plants 1..N (N the large or the small size) with the server's
 * counter at N; with `clientIds`, as many plants again as the large size, whose ids clients
 * chose above the counter, every other id (N+2, N+4, ...), recorded as plantstore records
 * them, so that every other server-assigned id meets one to skip (bench/data/seed.ts).
 */
export const DATA_SETS: Record<
  DataSet,
  { database: 'sqlite' | 'postgres'; size: 'large' | 'small'; clientIds: boolean }
> = {
  'sqlite-large': { database: 'sqlite', size: 'large', clientIds: false },
  'sqlite-small': { database: 'sqlite', size: 'small', clientIds: false },
  'sqlite-client-ids': { database: 'sqlite', size: 'large', clientIds: true },
  postgres: { database: 'postgres', size: 'large', clientIds: false },
  'postgres-small': { database: 'postgres', size: 'small', clientIds: false },
  'postgres-client-ids': { database: 'postgres', size: 'large', clientIds: true },
};

export interface ContenderPlan {
  role: Role;
  data: DataSet;
}

export const CONTENDERS = {
  'plantstore power': {
    role: { kind: 'plantstore', database: 'sqlite', durability: 'power' },
    data: 'sqlite-large',
  },
  'plantstore process': {
    role: { kind: 'plantstore', database: 'sqlite', durability: 'process' },
    data: 'sqlite-large',
  },
  'plantstore metrics': {
    role: { kind: 'plantstore', database: 'sqlite', durability: 'power', metrics: true },
    data: 'sqlite-large',
  },
  fastify: { role: { kind: 'fastify', database: 'sqlite' }, data: 'sqlite-large' },
  // Fastify with its own logger and plugins for plantstore's features.
  'fastify-plugins': {
    role: { kind: 'fastify', database: 'sqlite', plugins: true },
    data: 'sqlite-large',
  },
  bare: { role: { kind: 'bare', database: 'sqlite' }, data: 'sqlite-large' },
  'bare 2': { role: { kind: 'bare', database: 'sqlite' }, data: 'sqlite-large' },
  'plantstore power 10k': {
    role: { kind: 'plantstore', database: 'sqlite', durability: 'power' },
    data: 'sqlite-small',
  },
  'fastify 10k': { role: { kind: 'fastify', database: 'sqlite' }, data: 'sqlite-small' },
  'plantstore postgres': {
    role: { kind: 'plantstore', database: 'postgres', durability: 'power' },
    data: 'postgres',
  },
  'bare postgres': { role: { kind: 'bare', database: 'postgres' }, data: 'postgres' },
  // The rows of the paths users take: PostgreSQL at 10k, and creates without an id
  // after clients took many ids above the counter.
  'plantstore postgres 10k': {
    role: { kind: 'plantstore', database: 'postgres', durability: 'power' },
    data: 'postgres-small',
  },
  'bare postgres 10k': { role: { kind: 'bare', database: 'postgres' }, data: 'postgres-small' },
  'plantstore client ids': {
    role: { kind: 'plantstore', database: 'sqlite', durability: 'power' },
    data: 'sqlite-client-ids',
  },
  'fastify client ids': {
    role: { kind: 'fastify', database: 'sqlite' },
    data: 'sqlite-client-ids',
  },
  'plantstore postgres client ids': {
    role: { kind: 'plantstore', database: 'postgres', durability: 'power' },
    data: 'postgres-client-ids',
  },
  'bare postgres client ids': {
    role: { kind: 'bare', database: 'postgres' },
    data: 'postgres-client-ids',
  },
  // Creates with webhook endpoints subscribed, beside the same server with none (10k plants:
  // the size is not what these rows are about).
  'plantstore power 10k, 1 endpoint': {
    role: { kind: 'plantstore', database: 'sqlite', durability: 'power', endpoints: 1 },
    data: 'sqlite-small',
  },
  'plantstore power 10k, 1000 endpoints': {
    role: { kind: 'plantstore', database: 'sqlite', durability: 'power', endpoints: 1000 },
    data: 'sqlite-small',
  },
  'plantstore postgres 10k, 1 endpoint': {
    role: { kind: 'plantstore', database: 'postgres', durability: 'power', endpoints: 1 },
    data: 'postgres-small',
  },
  'plantstore postgres 10k, 1000 endpoints': {
    role: { kind: 'plantstore', database: 'postgres', durability: 'power', endpoints: 1000 },
    data: 'postgres-small',
  },
} as const satisfies Record<string, ContenderPlan>;

export type ContenderName = keyof typeof CONTENDERS;

/** A row: subject against yardstick, with a third server beside them for scale. */
export interface RowPlan {
  subject: ContenderName;
  yardstick: ContenderName;
  beside?: ContenderName;
  /** A self-check row judges the run, not plantstore. */
  selfCheck?: boolean;
}

export interface GroupPlan {
  /** `sqlite-large/getOne/64`: what --only matches. */
  id: string;
  phase: 'sqlite' | 'postgres';
  data: DataSet;
  scenario: ScenarioId;
  connections: number;
  contenders: ContenderName[];
  rows: RowPlan[];
}

const ALL: ScenarioId[] = ['delete', 'post', 'getOne', 'list'];

function group(
  data: DataSet,
  scenario: ScenarioId,
  connections: number,
  rows: RowPlan[],
): GroupPlan {
  const contenders = [
    ...new Set(rows.flatMap((r) => [r.subject, r.yardstick, ...(r.beside ? [r.beside] : [])])),
  ];
  const phase = DATA_SETS[data].database;
  return {
    id: `${data}/${scenario}/${connections}`,
    phase,
    data,
    scenario,
    connections,
    contenders,
    rows,
  };
}

// The size targets (1M within 15% of 10k) compare plantstore on the large data with itself on
// the small, in the same group, so that both are measured in the same rounds: compared across
// groups, minutes apart, the machine's drift between the two showed as 0.79× in one run and
// 1.26× and 1.37× in others, for a create whose work does not depend on the table's size.
const SQLITE_SIZES: RowPlan = { subject: 'plantstore power', yardstick: 'plantstore power 10k' };
const POSTGRES_SIZES: RowPlan = {
  subject: 'plantstore postgres',
  yardstick: 'plantstore postgres 10k',
};

/**
 * Every group of a full run, in the order they run (`connections` is the main figure, 64):
 * the SQLite phase, then the PostgreSQL one, each its reads first, then its writes, DELETE
 * last. A server keeps its copy of the data from group to group, and a write turn deletes and
 * refills plants, as many as its server served: a 1M copy after 20 DELETE turns had 18% more
 * pages (refilled pages split half full), and the bare yardstick read it 4 to 5% slower than a
 * fresh copy. Read groups after the writes compared layouts, not servers (self-checks 1.06
 * and 1.10 where the write groups' read 0.99 and 1.02); creates after the DELETE groups
 * compared a churned 1M copy with a fresh 10k one (bench/HISTORY.md, "Reads before writes").
 */
export function fullPlan(connections: number): GroupPlan[] {
  const rank = (g: GroupPlan) =>
    (g.phase === 'sqlite' ? 0 : 3) +
    (!SCENARIOS[g.scenario].writes ? 0 : g.scenario === 'delete' ? 2 : 1);
  // Array sort is stable: within a rank, the order written below.
  return writtenPlan(connections).sort((a, b) => rank(a) - rank(b));
}

/** The groups of a full run as written below, reads and writes mixed. */
function writtenPlan(connections: number): GroupPlan[] {
  const groups: GroupPlan[] = [];
  for (const scenario of ALL) {
    const rows: RowPlan[] = [
      { subject: 'plantstore power', yardstick: 'fastify', beside: 'bare' },
      { subject: 'plantstore process', yardstick: 'fastify', beside: 'bare' },
      { subject: 'plantstore power', yardstick: 'fastify-plugins' },
    ];
    // The self-check in every group, so that both copies have served the same load before
    // (a copy that joined for GET one alone read 0.72× in two runs). Copies with the same
    // history still differ, by process (bench/HISTORY.md, "Two copies of one server").
    rows.push({ subject: 'bare', yardstick: 'bare 2', selfCheck: true });
    // What --metrics-port costs, against the same server without it, on a read and a write.
    if (scenario === 'getOne' || scenario === 'post') {
      rows.push({ subject: 'plantstore metrics', yardstick: 'plantstore power' });
    }
    if (scenario !== 'delete') rows.push(SQLITE_SIZES);
    groups.push(group('sqlite-large', scenario, connections, rows));
  }
  // At one connection a power-durable write waits for its own fsync: the fsync target.
  for (const scenario of ['delete', 'post'] as const) {
    groups.push(
      group('sqlite-large', scenario, 1, [{ subject: 'plantstore power', yardstick: 'fastify' }]),
    );
  }
  // Creates with an Idempotency-Key, at 64 connections and at one (where a power-durable
  // create waits for its own fsync: one, if the key is kept in the create's transaction).
  for (const conns of [connections, 1]) {
    groups.push(
      group('sqlite-large', 'postKeyed', conns, [
        { subject: 'plantstore power', yardstick: 'fastify' },
      ]),
    );
  }
  // The tag filter on the large database.
  groups.push(
    group('sqlite-large', 'tagList', connections, [
      { subject: 'plantstore power', yardstick: 'fastify' },
      SQLITE_SIZES,
    ]),
  );
  // DELETE is not among them: a turn of DELETE walks more ids than 10k (see bench/README.md).
  for (const scenario of ['getOne', 'list', 'post', 'tagList'] as const) {
    const row: RowPlan = { subject: 'plantstore power 10k', yardstick: 'fastify 10k' };
    groups.push(group('sqlite-small', scenario, connections, [row]));
  }
  groups.push(
    group('sqlite-small', 'postEndpoints', connections, endpointRows('plantstore power 10k')),
  );
  // Creates without an id after clients took many ids above the counter.
  groups.push(
    group('sqlite-client-ids', 'post', connections, [
      { subject: 'plantstore client ids', yardstick: 'fastify client ids' },
      { subject: 'plantstore client ids', yardstick: 'plantstore power' },
    ]),
  );
  for (const scenario of [...ALL, 'tagList'] as const) {
    const rows: RowPlan[] = [{ subject: 'plantstore postgres', yardstick: 'bare postgres' }];
    if (scenario === 'post' || scenario === 'tagList') rows.push(POSTGRES_SIZES);
    groups.push(group('postgres', scenario, connections, rows));
  }
  groups.push(
    group('postgres', 'postKeyed', connections, [
      { subject: 'plantstore postgres', yardstick: 'bare postgres' },
    ]),
  );
  for (const scenario of ['post', 'tagList'] as const) {
    const row: RowPlan = { subject: 'plantstore postgres 10k', yardstick: 'bare postgres 10k' };
    groups.push(group('postgres-small', scenario, connections, [row]));
  }
  groups.push(
    group('postgres-client-ids', 'post', connections, [
      { subject: 'plantstore postgres client ids', yardstick: 'bare postgres client ids' },
      { subject: 'plantstore postgres client ids', yardstick: 'plantstore postgres' },
    ]),
  );
  groups.push(
    group('postgres-small', 'postEndpoints', connections, endpointRows('plantstore postgres 10k')),
  );
  return groups;
}

/**
 * Creates with 1 and with 1,000 endpoints subscribed against the same server with none, and
 * 1,000 against 1: a write's cost must not grow with the endpoints (the endpoint flood).
 */
function endpointRows(none: 'plantstore power 10k' | 'plantstore postgres 10k'): RowPlan[] {
  const one = `${none}, 1 endpoint` as const;
  const thousand = `${none}, 1000 endpoints` as const;
  return [
    { subject: one, yardstick: none },
    { subject: thousand, yardstick: none },
    { subject: thousand, yardstick: one },
  ];
}

/** The groups whose id contains one of `only` (all of them when `only` is empty). */
export function selectGroups(groups: GroupPlan[], only: string[]): GroupPlan[] {
  if (only.length === 0) return groups;
  return groups.filter((g) => only.some((part) => g.id.includes(part)));
}
