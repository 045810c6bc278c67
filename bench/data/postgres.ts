/**
 * The PostgreSQL side of the benchmark: a schema of its own per server, seeded as the SQLite
 * databases are, its keeper, and the backends serving a server's pool (to count their CPU).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import pg from 'pg';
import { ancestorsOf, processName } from '../harness/cpu.js';
import type { ServerSpec } from '../harness/servers.js';
import type { Keeper } from '../harness/turn.js';
import { clientIdsAbove, CREATED_BY_A_TURN, createTokens, ENDED } from './seed.js';

/** The PostgreSQL to measure on: PLANTSTORE_BENCH_DATABASE_URL, else the local default. */
export const BENCH_POSTGRES_URL =
  process.env.PLANTSTORE_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Whether a PostgreSQL answers at `url`; the error's message when not. */
export async function reachable(url: string): Promise<true | string> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export function withSchema(url: string, schema: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('options', `-c search_path=${schema}`);
  return parsed.toString();
}

/** A seeded schema: its URL (connections use it), and its keeper. */
export interface SeededSchema {
  url: string;
  keeper: PostgresKeeper;
  drop(): Promise<void>;
}

/**
 * A power-durable plantstore server on `schema`, for the phases that start one of their own,
 * and the PostgreSQL processes serving it (PostgresKeeper.backendPids), where PostgreSQL is on
 * this machine's loopback.
 */
export function plantstoreOn(schema: SeededSchema): {
  spec: (logLevel: string) => ServerSpec;
  backends?: (serverPid: number) => Promise<number[] | undefined>;
} {
  const spec = (logLevel: string): ServerSpec => ({
    kind: 'plantstore',
    databaseUrl: schema.url,
    durability: 'power',
    logLevel,
  });
  const port = loopbackPort(schema.url);
  if (port === undefined) return { spec };
  return { spec, backends: (pid) => schema.keeper.backendPids(pid, port) };
}

export interface SchemaOptions {
  /** Plants more whose ids clients chose above the counter, as seedSqlite seeds them. */
  clientIds?: number;
  /**
   * The sequence set above every plant's id: for the bare yardstick, which draws its ids
   * from plantstore's sequence and has no record of taken ids to skip (as SQLite's
   * AUTOINCREMENT goes on above the largest id for the SQLite yardsticks).
   */
  sequenceAboveAll?: boolean;
}

/**
 * A new schema in the database at `adminUrl`, migrated by plantstore, with tokens and
 * plants 1..n as the SQLite seed has them; with `clientIds`, the plants clients gave ids
 * above the counter, each id recorded in plant_ids_taken as plantstore records it.
 */
export async function seedSchema(
  adminUrl: string,
  n: number,
  tokensFile: string,
  options: SchemaOptions = {},
): Promise<SeededSchema> {
  const clientIds = options.clientIds ?? 0;
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  undropped.set(schema, adminUrl);
  const url = withSchema(adminUrl, schema);
  await createTokens({ db: '', databaseUrl: url }, tokensFile);
  await admin.query(`SET search_path = ${schema}`);
  await admin.query(
    `INSERT INTO plants (id, name, tag)
     SELECT x, 'plant ' || x, CASE WHEN x % 4 = 0 THEN 'shade' END FROM generate_series(1, $1::bigint) x`,
    [n],
  );
  const { first, last } = clientIdsAbove(n, clientIds);
  if (clientIds > 0) {
    const ids = 'generate_series($1::bigint, $2::bigint, 2) x';
    await admin.query(
      `INSERT INTO plants (id, name, tag)
       SELECT x, 'plant ' || x, CASE WHEN x % 4 = 0 THEN 'shade' END FROM ${ids}`,
      [first, last],
    );
    await admin.query(`INSERT INTO plant_ids_taken (id) SELECT x FROM ${ids}`, [first, last]);
  }
  // Server-assigned ids go on above the seeded ones, as if the server had assigned them.
  const sequence = options.sequenceAboveAll === true ? Math.max(n, last) : n;
  await admin.query("SELECT setval('plant_id_seq', $1)", [sequence]);
  await admin.query('VACUUM ANALYZE plants, plant_ids_taken');
  return {
    url,
    keeper: new PostgresKeeper(admin, clientIds),
    async drop() {
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      undropped.delete(schema);
      await admin.end();
    },
  };
}

/** Schemas made by seedSchema and not dropped yet, with the URL they were made on. */
const undropped = new Map<string, string>();

/**
 * Drops what seedSchema made and nothing dropped since: for a run that ends on a signal,
 * before its phases' own cleanup could run. Each on a connection of its own, since the
 * schema's own client may be in the middle of a statement; a failure is reported, not thrown.
 */
export async function dropUndroppedSchemas(report: (line: string) => void): Promise<void> {
  for (const [schema, url] of undropped) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      undropped.delete(schema);
      report(`dropped the PostgreSQL schema ${schema}`);
    } catch (error) {
      report(`could not drop the PostgreSQL schema ${schema}: ${String(error)}`);
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

export class PostgresKeeper implements Keeper {
  /** `clientIds`: the schema's plants whose ids clients chose (seedSchema), kept by trim. */
  constructor(
    readonly client: pg.Client,
    private readonly clientIds = 0,
  ) {}

  async refill(from: number, to: number): Promise<void> {
    if (to < from) return;
    await this.client.query(
      `INSERT INTO plants (id, name, tag)
       SELECT x, 'plant ' || x, CASE WHEN x % 4 = 0 THEN 'shade' END
       FROM generate_series($1::bigint, $2::bigint) x ON CONFLICT (id) DO NOTHING`,
      [from, to],
    );
  }

  async trim(plants: number): Promise<void> {
    await this.client.query(`DELETE FROM plants WHERE ${CREATED_BY_A_TURN((n) => `$${n}`)}`, [
      plants,
      clientIdsAbove(plants, this.clientIds).last,
    ]);
  }

  async clearEndedMessages(): Promise<number> {
    await this.client.query(`DELETE FROM webhook_attempts WHERE message_id IN (${ENDED})`);
    const messages = await this.client.query(`DELETE FROM webhook_messages WHERE id IN (${ENDED})`);
    return messages.rowCount ?? 0;
  }

  /**
   * PostgreSQL's postmaster, the parent of this keeper's backend, when both are processes of
   * this machine: the CPU of the backends that ended is in its reaped children's
   * (reapedCpuSeconds). Undefined elsewhere (a pid of another machine names nothing here, or
   * something else).
   */
  async postmasterPid(): Promise<number | undefined> {
    const { rows } = await this.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const backend = rows[0]!.pid;
    const parent = ancestorsOf(backend)[0];
    const postgres = (pid: number) => /postgres/.test(processName(pid));
    return parent !== undefined && postgres(backend) && postgres(parent) ? parent : undefined;
  }

  /** The schema is dropped by SeededSchema.drop, which closes the client. */
  async close(): Promise<void> {}

  /**
   * The PostgreSQL processes working for `serverPid`: the backends serving its connections
   * to `pgPort` (its sockets' local ports are their client ports), and PostgreSQL's own
   * background processes (WAL writer, checkpointer, autovacuum), which write what its
   * commits leave them. Undefined where PostgreSQL is not on this machine's loopback or
   * /proc cannot tell; their CPU then counts as other processes' load.
   */
  async backendPids(serverPid: number, pgPort: number): Promise<number[] | undefined> {
    const ports = localPortsTo(socketInodes(serverPid), pgPort);
    if (ports.length === 0) return undefined;
    const { rows } = await this.client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
       WHERE client_port = ANY($1::int[]) OR backend_type <> 'client backend'`,
      [ports],
    );
    return rows.map((r) => r.pid);
  }
}

/** The inodes of a process's sockets, from its /proc/<pid>/fd links (`socket:[123]`). */
export function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return inodes;
  }
  for (const fd of fds) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode !== undefined) inodes.add(inode);
    } catch {
      // The descriptor closed while listing: not a connection to count.
    }
  }
  return inodes;
}

/**
 * The local ports of the TCP connections (in /proc/net/tcp and tcp6 format) that belong to
 * `inodes` and go to `remotePort`.
 */
export function parseTcpTable(table: string, inodes: Set<string>, remotePort: number): number[] {
  const ports: number[] = [];
  for (const line of table.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    const [local, remote, inode] = [cols[1], cols[2], cols[9]];
    if (local === undefined || remote === undefined || inode === undefined) continue;
    if (!inodes.has(inode)) continue;
    if (parseInt(remote.split(':')[1] ?? '', 16) !== remotePort) continue;
    ports.push(parseInt(local.split(':')[1] ?? '', 16));
  }
  return ports;
}

function localPortsTo(inodes: Set<string>, remotePort: number): number[] {
  if (inodes.size === 0) return [];
  const tables = ['/proc/net/tcp', '/proc/net/tcp6'].map((file) => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return '';
    }
  });
  return tables.flatMap((table) => parseTcpTable(table, inodes, remotePort));
}

/** The port of a postgres:// URL when its host is this machine's loopback, else undefined. */
export function loopbackPort(url: string): number | undefined {
  const parsed = new URL(url);
  const local = ['127.0.0.1', 'localhost', '[::1]', ''].includes(parsed.hostname);
  return local ? Number(parsed.port || 5432) : undefined;
}
