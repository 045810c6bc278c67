import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { READ } from '../../src/store/postgres/plant-events.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { SQLITE } from '../helpers/backends.js';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { makeTempDir } from '../helpers/temp-dir.js';
import { exerciseStore } from './exercise-store.js';
import {
  type Allowance,
  checkTables,
  compiled,
  type Finding,
  jitThreshold,
  judge,
  nestedPlans,
  type PlanNode,
  postgresFindings,
  type RecordedStatement,
  sqliteFindings,
} from './query-plan-rules.js';

// Issue 22, item 3: no statement the stores run may read a whole table that grows, or sort
// all of it. Each test opens a store while recording every statement it prepares (SQLite)
// or sends (PostgreSQL), drives every method of it (exercise-store.ts), then asks the
// database for the plan of each statement recorded and judges it (query-plan-rules.ts). A
// new statement is covered as soon as a store method runs it; a scan that is meant has an
// entry below, with its reason, and nothing else may scan.

/** Tables that grow with use: a scan of one of them is a finding. */
const GROWING = new Set([
  'plants',
  'audit_log',
  'idempotency_keys',
  'webhook_messages',
  'webhook_attempts',
  'rate_limits',
  'plant_ids_taken',
  'plant_id_runs',
]);

/** Tables that stay small whatever the traffic: scanning them is fine. Every table is one or the other. */
const SMALL = new Map([
  ['tokens', 'issued by an operator, a handful'],
  ['webhook_endpoints', 'configured by an operator, a handful'],
  ['plant_id_counter', 'one row'],
  ['schema_migrations', 'one row per migration'],
  ['event_horizon', 'one row'],
]);

/** Scans of growing tables that are meant, by statement (SQLite: its SQL text; PostgreSQL: its name). */
const SQLITE_ALLOWED: Allowance[] = [
  {
    statement:
      /^SELECT json, last, EXISTS \(SELECT 1 FROM plants WHERE id > last\) AS more FROM \(.* FROM \(SELECT id, name, tag FROM plants ORDER BY id LIMIT @limit\)\)$/,
    table: 'plants',
    kind: 'SCAN plants',
    reason: 'the first page of the list: walks plants in id order and stops after LIMIT rows',
  },
  {
    statement: "SELECT count(*) FROM webhook_messages WHERE status = 'pending'",
    table: 'webhook_messages',
    kind: 'SCAN webhook_messages USING COVERING INDEX webhook_messages_due',
    reason:
      'the queue depth, for the metrics: a count of the pending messages needs every one; ' +
      'it walks the partial index webhook_messages_due, which holds the pending ones only',
  },
  {
    statement: /^SELECT min\(max\(f\.next_attempt_at, coalesce\(f\.lease_until, 0\)\)\)/,
    table: 'webhook_messages',
    kind: 'SCAN webhook_messages USING INDEX webhook_messages_due',
    reason:
      'nextDue: the earliest pending messages in the order of the partial index ' +
      'webhook_messages_due, LIMIT 1000 (NEXT_DUE_WINDOW): a backlog never makes it read more',
  },
];

const POSTGRES_ALLOWED: Allowance[] = [
  {
    statement: 'plants.page',
    table: 'plants',
    kind: 'Index Scan of all of plants_pkey',
    reason: 'the first page of the list: walks plants_pkey in order and stops after LIMIT rows',
  },
  {
    statement: 'webhooks.pending',
    table: 'webhook_messages',
    kind: 'Index Only Scan of all of webhook_messages_due',
    reason:
      'the queue depth, for the metrics: a count of the pending messages needs every one; ' +
      'it walks the partial index webhook_messages_due, which holds the pending ones only',
  },
  {
    statement: 'webhooks.nextDue',
    table: 'webhook_messages',
    kind: 'Index Scan of all of webhook_messages_due',
    reason:
      'nextDue: the earliest pending messages in the order of the partial index ' +
      'webhook_messages_due, LIMIT 1000 (NEXT_DUE_WINDOW): a backlog never makes it read more',
  },
  {
    statement: 'audit.list.true.false',
    table: 'audit_log',
    kind: 'Index Scan of a range of audit_log_pkey, filtered',
    reason:
      'the audit command since a time (never a request): it walks audit_log_pkey from the ' +
      'cursor, filtering at, so its first page reads the entries older than `since` once, and ' +
      'the later pages go on from their cursor. Entries are in seq order, not strictly in ' +
      'time order (instances have clocks of their own), which is why it is not read by ' +
      'audit_by_time; SQLite plans it alike (SEARCH rowid>?)',
  },
  {
    statement: 'rateLimits.purge',
    table: 'rate_limits',
    kind: 'Seq Scan',
    reason:
      'the purge of ended windows, once a minute on every instance: the table holds only the ' +
      'windows of about the last two minutes (this purge deletes the rest), so the scan reads ' +
      'what is live, never history; an index on window_end would cost every count an index ' +
      'entry more (a count is written 4 times a second per process)',
  },
];

/**
 * Fails on a finding no entry of `allowed` explains, and, when `strict`, on an entry that
 * explains nothing (the pass on stale statistics plans some statements better than the one
 * on current statistics, which keeps the list honest).
 */
function report(findings: Finding[], allowed: Allowance[], strict = true): void {
  const { unexplained, unused } = judge(findings, allowed);
  assert.equal(
    unexplained.length,
    0,
    `statements that read a whole growing table:\n\n${unexplained.map((f) => f.text).join('\n\n')}`,
  );
  if (!strict) return;
  assert.deepEqual(unused, [], 'allow-list entries that no statement needs any more: remove them');
}

/** A client of a fresh database the store has migrated (and closed), ended after `t`. */
async function migratedClient(t: TestContext): Promise<pg.Client> {
  const url = await freshDatabase(t);
  await (await openPostgresStore({ url, poolSize: 1 })).close();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  t.after(() => client.end());
  return client;
}

describe('query plans', () => {
  it(
    'SQLite: no statement of the store scans or sorts a growing table',
    { skip: SQLITE.skip },
    async (t) => {
      const file = join(makeTempDir(t), 'plans.db');
      const recorded = new Map<string, string>();
      const proto = Database.prototype as unknown as { prepare: (...args: unknown[]) => unknown };
      const prepare = proto.prepare;
      proto.prepare = function (this: unknown, ...args: unknown[]) {
        const source = args[0];
        if (typeof source === 'string' && !recorded.has(source)) recorded.set(source, caller());
        return prepare.apply(this, args);
      };
      try {
        const store = openSqliteStore({ file });
        try {
          await exerciseStore(store);
        } finally {
          await store.close();
        }
      } finally {
        proto.prepare = prepare;
      }
      const db = new Database(file, { readonly: true });
      t.after(() => db.close());
      const tables = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .pluck()
        .all() as string[];
      checkTables(tables, GROWING, SMALL);
      const { findings, planned } = sqliteFindings(db, recorded, GROWING);
      t.diagnostic(`${planned} SQLite statements planned`);
      assert.ok(planned >= 40, `only ${planned} statements recorded: is the recording broken?`);
      report(findings, SQLITE_ALLOWED);
    },
  );

  // Three times: on statistics that are current; on none at all, as after a burst of writes
  // that autovacuum has not analysed yet (or with autovacuum off): a plan that is right only
  // while the statistics are would turn a request into a scan of the table in between; and
  // on the store as it is when the server starts, empty. A prepared statement's generic plan
  // is made after its first runs and kept by the connection until the table is analysed:
  // made on empty tables, it may read a table whole, and go on doing so as the table grows
  // (every create with an Idempotency-Key read all the day's keys). Statements planned each
  // time are explained with their values, on the tables as they are then.
  const states = { analysed: true, 'never analysed': false, 'as a new store plans it': 'new' };
  for (const [state, analyze] of Object.entries(states)) {
    it(
      `PostgreSQL: no statement of the store scans or sorts a growing table (${state})`,
      { skip: POSTGRES_SKIP },
      async (t) => {
        const url = await freshDatabase(t);
        const recorded = new Map<string, RecordedStatement>();
        // Every statement of the pool runs on one of its clients (query.ts runs them there).
        const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
        const query = proto.query;
        proto.query = function (this: unknown, ...args: unknown[]) {
          const config = args[0] as { name?: string; text?: string; values?: unknown[] };
          if (typeof config === 'object' && config.text !== undefined) {
            // A statement run unprepared (planned with its values each time) has no name.
            const planEachTime = config.name === undefined;
            const name =
              config.name ?? `(planned each time) ${config.text.replace(/\s+/g, ' ').trim()}`;
            const seen = recorded.get(name);
            assert.ok(seen === undefined || seen.text === config.text, `two texts: ${name}`);
            if (seen === undefined) {
              recorded.set(name, { text: config.text, values: config.values ?? [], planEachTime });
            }
          }
          return query.apply(this, args);
        };
        try {
          const store = await openPostgresStore({ url, poolSize: 2 });
          try {
            await exerciseStore(store);
          } finally {
            await store.close();
          }
        } finally {
          proto.query = query;
        }
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        t.after(() => client.end());
        const { rows } = await client.query<{ name: string }>(
          `SELECT table_name AS name FROM information_schema.tables
         WHERE table_schema = current_schema()`,
        );
        checkTables(
          rows.map((row) => row.name),
          GROWING,
          SMALL,
        );
        if (analyze !== true) {
          for (const table of GROWING) {
            if (rows.some((row) => row.name === table)) {
              await client.query(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
            }
          }
        }
        const { findings, planned } = await postgresFindings(client, recorded, GROWING, {
          analyze: analyze === true,
          filled: analyze !== 'new',
        });
        t.diagnostic(`${planned} PostgreSQL statements planned`);
        assert.ok(planned >= 40, `only ${planned} statements recorded: is the recording broken?`);
        report(findings, POSTGRES_ALLOWED, analyze === true);
      },
    );
  }

  // The feed's read, as a stream following the writes runs it, forty times a second: the
  // page after a position near the head. On a store whose tables were never analysed, its
  // estimated cost must stay below the threshold past which PostgreSQL compiles a plan (JIT)
  // at each run: the horizon's one row planned as 2,200 once multiplied the page's cost.
  it(
    "PostgreSQL: a stream's read of the feed is not compiled (JIT), on stale statistics",
    { skip: POSTGRES_SKIP },
    async (t) => {
      const client = await migratedClient(t);
      await client.query(`
        ALTER TABLE audit_log SET (autovacuum_enabled = off);
        ALTER TABLE event_horizon SET (autovacuum_enabled = off);
        INSERT INTO audit_log (at, action, plant_id, after_name)
          SELECT now(), 'create', i, 'plant ' || i FROM generate_series(1, 20000) i;`);
      const { rows } = await client.query<{ reltuples: number }>(
        `SELECT reltuples FROM pg_class WHERE oid IN ('audit_log'::regclass, 'event_horizon'::regclass)`,
      );
      assert.deepEqual(
        rows.map((row) => row.reltuples),
        [-1, -1],
        'the tables must not have been analysed',
      );
      const above = await jitThreshold(client);
      // The page a stream 130 events behind reads, up to the watermark at the head: planned
      // with its values (a prepared statement's first runs), then generic (the later ones).
      const values = ['19870', 1000, '20000'];
      const custom = await client.query(`EXPLAIN (FORMAT JSON) ${READ}`, values);
      await client.query(`PREPARE feed_read AS ${READ}`);
      await client.query('SET plan_cache_mode = force_generic_plan');
      const generic = await client.query(
        `EXPLAIN (FORMAT JSON) EXECUTE feed_read(${values.map((v) => `'${v}'`).join(', ')})`,
      );
      for (const [how, explained] of [
        ['with its values', custom],
        ['generic', generic],
      ] as const) {
        const plan = (explained.rows[0] as { 'QUERY PLAN': { Plan: PlanNode }[] })[
          'QUERY PLAN'
        ][0]!;
        assert.deepEqual(compiled(`events.read (${how})`, READ, plan.Plan, above), []);
      }
    },
  );

  // A skip's reads must not depend on the statistics being current: after an import of many
  // client ids, autovacuum analyses plant_ids_taken only later, and the planner then takes a
  // range of the table for a hundred rows. Here the table was never analysed.
  it(
    'PostgreSQL: a skip reads at most 64 taken ids a statement, on stale statistics',
    { skip: POSTGRES_SKIP },
    async (t) => {
      const client = await migratedClient(t);
      await client.query(`
        ALTER TABLE plant_ids_taken SET (autovacuum_enabled = off);
        INSERT INTO plant_ids_taken (id) SELECT 2 * i FROM generate_series(1, 30000) i;
        INSERT INTO plant_ids_taken (id) SELECT i FROM generate_series(100001, 120000) i;`);
      const { rows } = await client.query<{ reltuples: number }>(
        `SELECT reltuples FROM pg_class WHERE oid = 'plant_ids_taken'::regclass`,
      );
      assert.equal(rows[0]!.reltuples, -1, 'the table must not have been analysed');
      const most = (node: PlanNode): number =>
        Math.max(node['Actual Rows'] ?? 0, ...(node.Plans ?? []).map(most));
      // A run of one id amid thousands, then a run of 20,000 (skipped 10,000 at a time).
      for (const drawn of ['2', '100001']) {
        const plans = await nestedPlans(client, 'SELECT plant_ids_skip($1::bigint)', [drawn], {
          analyze: true,
        });
        assert.ok(plans.length > 0, 'the skip ran no statement');
        for (const { query, plan } of plans) {
          assert.ok(most(plan) <= 64, `${most(plan)} rows read by: ${query}`);
        }
      }
    },
  );
});

/** Where in the store a statement is prepared, for the messages: `src/store/sqlite/x.ts:12`. */
function caller(): string {
  const frames = new Error().stack?.split('\n') ?? [];
  const frame = frames.find((line) => line.includes('/src/store/'));
  return frame?.replace(/^.*\/(src\/store\/[^:]+:\d+).*$/, '$1') ?? 'somewhere outside src/store';
}
