import assert from 'node:assert/strict';
import type Database from 'better-sqlite3';
import type pg from 'pg';

// How test/store/query-plans.test.ts reads a plan: what counts as reading a whole growing
// table, on each database.

/** A statement's plan reading a whole growing table. */
export interface Finding {
  /** SQLite: the statement's SQL, whitespace collapsed; PostgreSQL: its name. */
  statement: string;
  table: string;
  /** How: SQLite, the plan's line (and a sort after it); PostgreSQL, the node and index. */
  kind: string;
  /** The finding as the failure shows it: where, the SQL, the plan. */
  text: string;
}

/** A scan that is meant: `statement` as in Finding (or a pattern of it), and why. */
export interface Allowance {
  statement: string | RegExp;
  table: string;
  /** The finding's kind, exactly: another way to read the table (an index dropped) is not allowed. */
  kind: string | RegExp;
  reason: string;
}

const like = (pattern: string | RegExp, text: string) =>
  typeof pattern === 'string' ? pattern === text : pattern.test(text);

const matches = (allowance: Allowance, finding: Finding) =>
  allowance.table === finding.table &&
  like(allowance.statement, finding.statement) &&
  like(allowance.kind, finding.kind);

/** The findings no allowance explains, and the allowances that explain no finding. */
export function judge(findings: Finding[], allowed: Allowance[]) {
  return {
    unexplained: findings.filter((finding) => !allowed.some((a) => matches(a, finding))),
    unused: allowed
      .filter((allowance) => !findings.some((finding) => matches(allowance, finding)))
      .map((allowance) => `${allowance.statement} (${allowance.table}: ${allowance.kind})`),
  };
}

/** Every table of the schema is known to grow or to stay small: a new one must be sorted in. */
export function checkTables(
  tables: string[],
  growing: ReadonlySet<string>,
  small: ReadonlyMap<string, string>,
): void {
  const unknown = tables.filter((table) => !growing.has(table) && !small.has(table));
  assert.deepEqual(unknown, [], 'tables neither GROWING nor SMALL: say which they are');
}

const oneLine = (sql: string) => sql.replace(/\s+/g, ' ').trim();

/** Statements that have a plan: the others (BEGIN, SAVEPOINT, PRAGMA, ...) read no table. */
const PLANNED = /^(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i;

// ---------------------------------------------------------------------------------------
// SQLite
//
// EXPLAIN QUERY PLAN (https://sqlite.org/eqp.html) says, for each table or index a statement
// reads, SEARCH or SCAN.
//
// - SEARCH seeks into a b-tree with the constraints shown in parentheses, an equality (id=?)
//   or a range from a bound the statement is given (rowid>?, at<?), and reads the rows
//   within them: accepted.
// - SCAN walks a b-tree from one end: `SCAN t` the table, `SCAN t USING [COVERING] INDEX i`
//   the whole of index i (of a partial index, the rows its WHERE selects), in its order.
//   Either way it reads every row unless a LIMIT stops the walk early, which the plan does
//   not show: every SCAN of a growing table is a finding, with or without an index, and a
//   SCAN that a LIMIT keeps short (the first page of a list) needs an allow-list entry.
// - `SEARCH t USING [COVERING] INDEX i` with no constraint in parentheses uses a partial
//   index for its WHERE alone and walks all of it: a SCAN of that index, a finding. (A bare
//   `SEARCH t`, no index named, is min() or max() reading one end of t.)
// - `SEARCH t USING AUTOMATIC [COVERING] INDEX` builds a transient index by reading all of t
//   at every run: a finding.
// - `USE TEMP B-TREE FOR ORDER BY` (GROUP BY, DISTINCT, LAST TERM OF ORDER BY) sorts the rows
//   read: in a plan that reads a growing table whole, a sort of all of it, which the finding
//   says; after SEARCHes only, a sort of the rows found by key: accepted.
//
// What the plan does not show is how many rows a SEARCH of a range reads and drops for a
// condition on another column: `SEARCH audit_log USING INTEGER PRIMARY KEY (rowid>?)` is
// what a keyset page filtered by plant_id reads without its index too. PostgreSQL shows it
// (a Filter), and the rules there catch it (below); here, full scans only.
//
// Nothing in plantstore runs ANALYZE, so SQLite plans from the schema alone, whatever the
// rows and the values bound: each statement is planned with NULL for every parameter.
// ---------------------------------------------------------------------------------------

interface EqpRow {
  id: number;
  parent: number;
  detail: string;
}

// Words that follow a table name but are no alias of it.
const NOT_ALIASES = new Set(
  'as where set on join left inner cross natural using values select order group limit returning default indexed not'.split(
    ' ',
  ),
);

/** The table each name in a statement stands for: its own name, or an alias given to it. */
function tablesByName(sql: string): Map<string, string> {
  const names = new Map<string, string>();
  for (const [, table, alias] of sql.matchAll(
    /\b(?:FROM|JOIN|UPDATE|INTO)\s+(\w+)(?:\s+(?:AS\s+)?(\w+))?/gi,
  )) {
    const name = table!.toLowerCase();
    names.set(name, name);
    if (alias !== undefined && !NOT_ALIASES.has(alias.toLowerCase())) {
      names.set(alias.toLowerCase(), name);
    }
  }
  return names;
}

/** NULL for every parameter of `sql`: positional (?) and named (@x, :x, $x) alike. */
function nullParameters(sql: string): unknown[] {
  const code = sql.replace(/'(?:[^']|'')*'/g, "''");
  const positional = (code.match(/\?/g) ?? []).map(() => null);
  const named = [...code.matchAll(/[@:$]([A-Za-z_]\w*)/g)].map(([, name]) => [name, null]);
  return named.length === 0 ? positional : [...positional, Object.fromEntries(named)];
}

function renderEqp(rows: EqpRow[]): string {
  const depth = new Map<number, number>([[0, 0]]);
  return rows
    .map((row) => {
      const level = (depth.get(row.parent) ?? 0) + 1;
      depth.set(row.id, level);
      return `${'  '.repeat(level + 1)}${row.detail}`;
    })
    .join('\n');
}

/** The findings of every statement recorded (SQL text -> where it was prepared). */
export function sqliteFindings(
  db: Database.Database,
  recorded: ReadonlyMap<string, string>,
  growing: ReadonlySet<string>,
): { findings: Finding[]; planned: number } {
  const findings: Finding[] = [];
  let planned = 0;
  for (const [sql, where] of recorded) {
    if (!PLANNED.test(sql.trim())) continue;
    planned += 1;
    const rows = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...nullParameters(sql)) as EqpRow[];
    const names = tablesByName(sql);
    // [table, the plan line that reads all of it]
    const found: [string, string][] = [];
    let sorts = false;
    for (const { detail } of rows) {
      const access = /^(SCAN|SEARCH) (\w+)/.exec(detail);
      const table = access && names.get(access[2]!.toLowerCase());
      if (table !== undefined && table !== null && growing.has(table)) {
        const whole =
          access![1] === 'SCAN' ||
          /AUTOMATIC/.test(detail) ||
          (/USING (COVERING )?INDEX/.test(detail) && !detail.includes('('));
        if (whole) found.push([table, detail]);
      }
      if (/^USE TEMP B-TREE FOR /.test(detail)) sorts = true;
    }
    const statement = oneLine(sql);
    for (const [table, line] of found) {
      const kind = sorts ? `${line}, then a sort` : line;
      findings.push({
        statement,
        table,
        kind,
        text: `${where}: ${table}: ${kind}\n    ${statement}\n${renderEqp(rows)}`,
      });
    }
  }
  return { findings, planned };
}

// ---------------------------------------------------------------------------------------
// PostgreSQL
//
// PostgreSQL 15 has no EXPLAIN (GENERIC_PLAN): each statement is PREPAREd as the store's
// pool prepares it (the parameters' types inferred alike) and explained with plan_cache_mode
// = force_generic_plan, the plan that serves every value once the plan cache settles on it;
// EXPLAIN without ANALYZE runs nothing, writes and nextval included. The growing tables hold
// tens of thousands of rows, ANALYZEd, so that the planner weighs an index against a scan
// as it would on a database in use. Findings: a Seq Scan of a growing table; an Index
// (Only) Scan of one with no Index Cond, which walks the whole index in its order (as
// SQLite's SCAN ... USING INDEX, kept short only by a LIMIT); a Sort above either. And one
// SQLite's plans cannot show: an index scan of a range only (no equality in its Index Cond)
// with a Filter, which reads and drops rows, as many as lie in the range before the LIMIT
// is met: a keyset page by `id > $n` filtering on another column, where an index on that
// column was meant. (On SQLite such a plan reads SEARCH t USING ... (rowid>?) and passes:
// the rules there catch full scans only.)
//
// A statement that calls a function of the schema (plpgsql) runs statements EXPLAIN does not
// show. It is run, in a transaction rolled back, with the values the store gave it, under
// auto_explain with its nested statements logged as NOTICEs at the client, under the same
// plan cache mode; their plans are judged alike.
// ---------------------------------------------------------------------------------------

export interface PlanNode {
  'Node Type': string;
  'Total Cost'?: number;
  'Actual Rows'?: number;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Filter?: string;
  Plans?: PlanNode[];
}

/** The growing tables `node` reads whole, with how, and whether a Sort sorts one. */
function planFindings(node: PlanNode, growing: ReadonlySet<string>): [string, string][] {
  let found = (node.Plans ?? []).flatMap((child) => planFindings(child, growing));
  const table = node['Relation Name'];
  const type = node['Node Type'];
  if (table !== undefined && growing.has(table)) {
    const cond = node['Index Cond'];
    if (type === 'Seq Scan') found.push([table, 'Seq Scan']);
    else if ((type === 'Index Scan' || type === 'Index Only Scan') && !cond) {
      found.push([table, `${type} of all of ${node['Index Name']}`]);
    } else if (cond && !/ = /.test(cond) && node.Filter) {
      found.push([table, `${type} of a range of ${node['Index Name']}, filtered`]);
    }
  }
  if (/Sort$/.test(type)) found = found.map(([t, kind]) => [t, `${kind}, then ${type}`]);
  return found;
}

/** A statement the store ran: its text, the values it was first given, how it was planned. */
export interface RecordedStatement {
  text: string;
  values: unknown[];
  /** Run unprepared: planned with its values each time, so explained with those values. */
  planEachTime: boolean;
}

/** The findings of every statement recorded (by name). */
export async function postgresFindings(
  client: pg.Client,
  recorded: ReadonlyMap<string, RecordedStatement>,
  growing: ReadonlySet<string>,
  { analyze = true, filled = true } = {},
): Promise<{ findings: Finding[]; planned: number }> {
  if (filled) await fill(client, { analyze });
  const functions = (
    await client.query<{ name: string }>(
      'SELECT proname AS name FROM pg_proc WHERE pronamespace = current_schema()::regnamespace',
    )
  ).rows.map((row) => row.name);
  await client.query('SET plan_cache_mode = force_generic_plan');
  const jitAbove = await jitThreshold(client);
  const findings: Finding[] = [];
  let planned = 0;
  const judge = (statement: string, sql: string, plan: PlanNode, shown: string) => {
    for (const [table, kind] of planFindings(plan, growing)) {
      findings.push({
        statement,
        table,
        kind,
        text: `${statement}: ${table}: ${kind}\n    ${oneLine(sql)}\n${shown}`,
      });
    }
  };
  for (const [name, { text, values, planEachTime }] of recorded) {
    if (!PLANNED.test(text.trim())) continue;
    planned += 1;
    if (planEachTime) {
      // Planned with the tables as they are each time: on empty ones, a scan is right.
      if (!filled) continue;
      const json = await client.query(`EXPLAIN (FORMAT JSON) ${text}`, values);
      const plan = (json.rows[0] as { 'QUERY PLAN': { Plan: PlanNode }[] })['QUERY PLAN'][0]!;
      judge(name, text, plan.Plan, JSON.stringify(plan.Plan, null, 1));
      findings.push(...compiled(name, text, plan.Plan, jitAbove));
      continue;
    }
    await client.query(`PREPARE plan_check AS ${text}`);
    try {
      const args = values.length === 0 ? '' : `(${values.map(() => 'NULL').join(', ')})`;
      const explain = `EXPLAIN (COSTS OFF%) EXECUTE plan_check${args}`;
      const json = await client.query(explain.replace('COSTS OFF%', 'FORMAT JSON'));
      const plan = (json.rows[0] as { 'QUERY PLAN': { Plan: PlanNode }[] })['QUERY PLAN'][0]!;
      findings.push(...compiled(name, text, plan.Plan, jitAbove));
      // The first runs of a prepared statement, and the later ones when its generic plan is
      // no cheaper, are planned with their values: those plans must stay below it too.
      const custom = await client.query(`EXPLAIN (FORMAT JSON) ${text}`, values);
      const customPlan = (custom.rows[0] as { 'QUERY PLAN': { Plan: PlanNode }[] })[
        'QUERY PLAN'
      ][0]!;
      findings.push(...compiled(`${name} (with its values)`, text, customPlan.Plan, jitAbove));
      if (planFindings(plan.Plan, growing).length > 0) {
        const lines = await client.query<{ 'QUERY PLAN': string }>(explain.replace('%', ''));
        const shown = lines.rows.map((row) => `      ${row['QUERY PLAN']}`).join('\n');
        judge(name, text, plan.Plan, shown);
      }
    } finally {
      await client.query('DEALLOCATE plan_check');
    }
    const called = functions.filter((fn) => new RegExp(`\\b${fn}\\s*\\(`).test(text));
    if (called.length > 0) {
      const nested = await nestedPlans(client, text, values);
      // On empty tables a function may return before it runs a statement.
      assert.ok(
        nested.length > 0 || !filled,
        `${name} calls ${called.join(', ')}, but no statement inside was planned: ` +
          'give the test data on which it runs them',
      );
      for (const { query, plan } of nested) {
        judge(`${name} > ${oneLine(query)}`, query, plan, JSON.stringify(plan, null, 1));
      }
    }
  }
  return { findings, planned };
}

/**
 * The estimated cost above which PostgreSQL compiles a plan (JIT): this server's
 * jit_above_cost, or the default (100,000) where this server has JIT off, since the servers
 * plantstore runs against may not.
 */
export async function jitThreshold(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ on: boolean; above: number }>(
    `SELECT current_setting('jit')::boolean AS on,
       current_setting('jit_above_cost')::float8 AS above`,
  );
  const { on, above } = rows[0]!;
  return on && above >= 0 ? above : 100_000;
}

/**
 * A plan whose estimated cost passes the JIT threshold: PostgreSQL (JIT on, its default)
 * compiles it at every run, milliseconds each for a statement that runs in a fraction of
 * one. A misestimate does it, such as 2,200 rows for a one-row table never analysed.
 */
export function compiled(statement: string, sql: string, plan: PlanNode, above: number): Finding[] {
  const cost = plan['Total Cost'];
  assert.ok(cost !== undefined, `${statement}: a plan without its cost`);
  if (cost <= above) return [];
  const kind = `estimated cost above jit_above_cost (${above})`;
  return [
    {
      statement,
      table: '(any)',
      kind,
      text: `${statement}: ${kind}: ${cost}\n    ${oneLine(sql)}\n${JSON.stringify(plan, null, 1)}`,
    },
  ];
}

/**
 * The plans of the statements `text` runs inside the functions it calls (see above); with
 * `analyze`, each node with the rows it actually read (`Actual Rows`, per loop).
 */
export async function nestedPlans(
  client: pg.Client,
  text: string,
  values: unknown[],
  { analyze = false } = {},
): Promise<{ query: string; plan: PlanNode }[]> {
  const plans: { query: string; plan: PlanNode }[] = [];
  const listener = (notice: { message?: string }) => {
    const message = notice.message ?? '';
    const start = message.indexOf('{');
    if (!message.includes('plan:') || start < 0) return;
    const logged = JSON.parse(message.slice(start)) as { 'Query Text': string; Plan: PlanNode };
    // The statement itself is logged too; it was explained above.
    if (logged['Query Text'].trim() !== text.trim()) {
      plans.push({ query: logged['Query Text'], plan: logged.Plan });
    }
  };
  client.on('notice', listener);
  try {
    await client.query(`LOAD 'auto_explain'`);
    await client.query(`SET auto_explain.log_format = json`);
    await client.query(`SET auto_explain.log_level = notice`);
    await client.query(`SET auto_explain.log_nested_statements = on`);
    await client.query(`SET auto_explain.log_analyze = ${analyze ? 'on' : 'off'}`);
    await client.query('BEGIN');
    try {
      await client.query('SET LOCAL auto_explain.log_min_duration = 0');
      await client.query(text, values);
    } finally {
      await client.query('ROLLBACK');
    }
  } finally {
    client.off('notice', listener);
  }
  return plans;
}

/**
 * Tens of thousands of rows in every growing table, as a database in use holds: messages to
 * ten endpoints, most delivered, a few pending or failed, and a backlog of events to fan out
 * to them; keys and audit entries over months;
 * taken ids from 1 up, so that the skip the store ran (of the id 1 it drew) finds its run.
 */
export async function fill(client: pg.Client, { analyze = true } = {}): Promise<void> {
  const n = 30_000;
  await client.query(`
    INSERT INTO plants (id, name, tag)
      SELECT 1000 + i, 'plant ' || i, CASE WHEN i % 10 = 0 THEN 'tag' || (i % 50) END
      FROM generate_series(1, ${n}) i ON CONFLICT DO NOTHING;
    INSERT INTO plant_ids_taken (id) SELECT i FROM generate_series(1, ${n}) i ON CONFLICT DO NOTHING;
    INSERT INTO audit_log (at, action, plant_id, after_name)
      SELECT now() - i * interval '5 minutes', 'create', 1000 + i, 'plant ' || i
      FROM generate_series(1, ${n}) i;
    INSERT INTO idempotency_keys (token_id, key, fingerprint, created_at, expires_at,
        lease_until, status)
      SELECT i % 20, 'key' || i, 'f', now() - i * interval '1 minute',
        now() - i * interval '1 minute' + interval '1 day', now(), 201
      FROM generate_series(1, ${n}) i;
    INSERT INTO webhook_endpoints (url, events, created_at, updated_at, secret)
      SELECT 'https://fill.example/' || i, 'plant.created', now(), now(), 'whsec_fill'
      FROM generate_series(1, 10) i;
    INSERT INTO webhook_messages (endpoint_id, webhook_id, event_type, payload, status,
        created_at, next_attempt_at, completed_at)
      SELECT (SELECT max(id) FROM webhook_endpoints) - i % 10, 'msg_fill' || i, 'plant.created',
        '{}',
        CASE WHEN i % 100 = 0 THEN 'pending' WHEN i % 100 = 1 THEN 'failed' ELSE 'delivered' END,
        now() - i * interval '1 minute', now() - i * interval '1 minute',
        CASE WHEN i % 100 <> 0 THEN now() - i * interval '1 minute' END
      FROM generate_series(1, ${n}) i;
    INSERT INTO webhook_attempts (message_id, at, duration_ms, http_status, response_excerpt)
      SELECT id, created_at, 5, 200, '' FROM webhook_messages;
    INSERT INTO rate_limits (policy, subject, window_start, window_end, count)
      SELECT 'token', (i % 5000)::text, (i / 5000) * 60, (i / 5000) * 60 + 60, 1
      FROM generate_series(1, ${n}) i ON CONFLICT DO NOTHING;
    ${analyze ? 'ANALYZE;' : ''}`);
}
