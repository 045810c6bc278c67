import pg from 'pg';
import type { NewPlant, Plant, PlantChange, PlantQuery } from '../../core/plant.js';
import type { TokenRecord } from '../../core/tokens.js';
import { loadMigrations } from '../migrations.js';
import { type PlantRow, scopesFromText, toPlant } from '../rows.js';
import {
  type Durability,
  IdsExhaustedError,
  type NewToken,
  PlantChangedError,
  PlantExistsError,
  type PlantStore,
  type RevokeOutcome,
  type Store,
  StoreUnavailableError,
  type TokenStore,
} from '../store.js';
import { migratePostgres } from './migrate.js';
import { postgresRateLimits } from './rate-limits.js';

export interface PostgresOptions {
  /** A `postgres://` or `postgresql://` connection URL. */
  url: string;
  durability?: Durability;
  /** Connections this process keeps at most. */
  poolSize?: number;
}

export const DEFAULT_POOL_SIZE = 10;
/** How long a request waits for a free connection (or a new one) before a 503. */
export const CONNECT_TIMEOUT_MS = 2_000;
/** How long one statement may run, on the server and on the wire, before a 503. */
export const STATEMENT_TIMEOUT_MS = 5_000;

const INT8_OID = 20;

// int8 arrives as text; turn it into a bigint, never a number, in this pool only.
const types = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8_OID && format !== 'binary'
      ? (text: string) => BigInt(text)
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/** Opens a pool on the database, migrating it first (under a lock, see migrate.ts). */
export async function openPostgresStore({
  url,
  durability = 'power',
  poolSize = DEFAULT_POOL_SIZE,
}: PostgresOptions): Promise<Store> {
  const migration = await migratePostgres(url, loadMigrations('postgres'));
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    statement_timeout: STATEMENT_TIMEOUT_MS,
    // A connection whose peer vanished without a word (a cut cable, a dead proxy) is
    // noticed by this client-side timeout, not by TCP minutes later.
    query_timeout: STATEMENT_TIMEOUT_MS + 1_000,
    keepAlive: true,
    application_name: 'plantstore',
    types,
  });
  // An idle connection that breaks is dropped by the pool; the next query opens a new
  // one. Without a listener, the error would crash the process.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => {
    // Every statement here is one autocommit statement written for READ COMMITTED; a
    // stricter default on the database would turn concurrent creates into 40001s.
    const settings = ["SET default_transaction_isolation = 'read committed'"];
    // --durability process: the commit is answered before the WAL is flushed, PostgreSQL's
    // own way of leaving the flush for later (the last commits may be lost, never corrupted).
    if (durability === 'process') settings.push('SET synchronous_commit = off');
    client.query(settings.join('; ')).catch(() => undefined);
  });
  const query = <R extends pg.QueryResultRow>(name: string, text: string, values: unknown[]) =>
    guard(() => pool.query<R>({ name, text, values }));
  let closed = false;
  return {
    plants: postgresPlants(query),
    tokens: postgresTokens(query),
    rateLimits: postgresRateLimits(query),
    migration,
    async ping() {
      await query('ping', 'SELECT 1', []);
    },
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}

export type Query = <R extends pg.QueryResultRow>(
  name: string,
  text: string,
  values: unknown[],
) => Promise<pg.QueryResult<R>>;

// SQLSTATE classes and codes that say "not now" rather than "not this": connection
// exceptions, serialization failures and deadlocks, insufficient resources, operator
// intervention, system errors; a read-only server (a failover in progress), refused
// credentials (a rotation in progress) and a missing database.
const UNAVAILABLE_CLASSES = new Set(['08', '28', '3D', '40', '53', '57', '58']);
const UNAVAILABLE_CODES = new Set(['25006']);

// What pg itself throws when the connection, not the statement, failed.
const CONNECTION_TROUBLE = /connection|terminated|timeout|not queryable/i;

/** Whether a failed database call means "try again later" (503) rather than a bug (500). */
export function isUnavailable(error: unknown): boolean {
  if (error instanceof pg.DatabaseError) {
    const code = error.code ?? '';
    return UNAVAILABLE_CLASSES.has(code.slice(0, 2)) || UNAVAILABLE_CODES.has(code);
  }
  if (!(error instanceof Error)) return false;
  // Refused, reset, broken pipe, unreachable: Node's system errors carry a syscall.
  return 'syscall' in error || CONNECTION_TROUBLE.test(error.message);
}

async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw isUnavailable(error) ? new StoreUnavailableError(error) : error;
  }
}

const COLUMNS = 'id, name, tag';

function postgresPlants(query: Query): PlantStore {
  const page = (where: string) => `SELECT ${COLUMNS} FROM plants ${where} ORDER BY id LIMIT $1`;
  return {
    async insert({ id, name, tag }: NewPlant) {
      if (id === undefined) {
        const { rows } = await query<PlantRow>(
          'plants.insertNew',
          `WITH next AS (
             UPDATE plant_ids SET high = high + 1 WHERE high < 9223372036854775807 RETURNING high)
           INSERT INTO plants (id, name, tag) SELECT high, $1, $2 FROM next
           RETURNING ${COLUMNS}`,
          [name, tag ?? null],
        );
        if (rows[0] === undefined) throw new IdsExhaustedError();
        return toPlant(rows[0]);
      }
      // The INSERT reads from `bump`, so the plant_ids row is locked before the plants
      // row: the same order as above (see the migration).
      const { rows } = await query<PlantRow>(
        'plants.insertWithId',
        `WITH bump AS (
           UPDATE plant_ids SET high = greatest(high, $1::bigint) RETURNING high)
         INSERT INTO plants (id, name, tag) SELECT $1::bigint, $2, $3 FROM bump
         ON CONFLICT (id) DO NOTHING
         RETURNING ${COLUMNS}`,
        [id.toString(), name, tag ?? null],
      );
      if (rows[0] === undefined) throw new PlantExistsError(id);
      return toPlant(rows[0]);
    },
    async get(id: bigint) {
      const { rows } = await query<PlantRow>(
        'plants.get',
        `SELECT ${COLUMNS} FROM plants WHERE id = $1`,
        [id.toString()],
      );
      return rows[0] && toPlant(rows[0]);
    },
    async list({ limit, after, tag }: PlantQuery) {
      const [name, text, values] =
        tag === undefined
          ? after === undefined
            ? ['plants.page', page(''), [limit]]
            : ['plants.pageAfter', page('WHERE id > $2'), [limit, after.toString()]]
          : after === undefined
            ? ['plants.pageTag', page('WHERE tag = $2'), [limit, tag]]
            : [
                'plants.pageTagAfter',
                page('WHERE tag = $2 AND id > $3'),
                [limit, tag, after.toString()],
              ];
      const { rows } = await query<PlantRow>(name, text, values);
      return rows.map(toPlant);
    },
    async update(id: bigint, change: PlantChange, expected?: Plant) {
      const set = `UPDATE plants SET name = coalesce($2::text, name),
           tag = CASE WHEN $3::boolean THEN $4::text ELSE tag END WHERE id = $1`;
      const values = [
        id.toString(),
        change.name ?? null,
        change.tag !== undefined,
        change.tag ?? null,
      ];
      const { rows } =
        expected === undefined
          ? await query<PlantRow>('plants.update', `${set} RETURNING ${COLUMNS}`, values)
          : await query<PlantRow>(
              'plants.updateIf',
              `${set} AND name = $5 AND tag IS NOT DISTINCT FROM $6 RETURNING ${COLUMNS}`,
              [...values, expected.name, expected.tag ?? null],
            );
      if (rows[0] !== undefined) return toPlant(rows[0]);
      if (expected !== undefined && (await exists(id))) throw new PlantChangedError(id);
      return undefined;
    },
    async delete(id: bigint, expected?: Plant) {
      const { rowCount } =
        expected === undefined
          ? await query('plants.delete', 'DELETE FROM plants WHERE id = $1', [id.toString()])
          : await query(
              'plants.deleteIf',
              'DELETE FROM plants WHERE id = $1 AND name = $2 AND tag IS NOT DISTINCT FROM $3',
              [id.toString(), expected.name, expected.tag ?? null],
            );
      if ((rowCount ?? 0) > 0) return true;
      if (expected !== undefined && (await exists(id))) throw new PlantChangedError(id);
      return false;
    },
  };

  // After a conditional write matched no row: was the plant changed, or is it gone?
  async function exists(id: bigint): Promise<boolean> {
    const { rows } = await query('plants.exists', 'SELECT 1 FROM plants WHERE id = $1', [
      id.toString(),
    ]);
    return rows.length > 0;
  }
}

interface TokenRow {
  id: bigint;
  name: string;
  hash: string;
  scopes: string;
  created_at: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const toToken = (row: TokenRow): TokenRecord => ({
  id: Number(row.id),
  name: row.name,
  hash: row.hash,
  scopes: scopesFromText(row.scopes),
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  lastUsedAt: row.last_used_at,
  revokedAt: row.revoked_at,
});

const TOKEN_COLUMNS = 'id, name, hash, scopes, created_at, expires_at, last_used_at, revoked_at';

function postgresTokens(query: Query): TokenStore {
  return {
    async create(token: NewToken) {
      const { rows } = await query<TokenRow>(
        'tokens.create',
        `INSERT INTO tokens (name, hash, scopes, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5) RETURNING ${TOKEN_COLUMNS}`,
        [token.name, token.hash, token.scopes.join(' '), token.createdAt, token.expiresAt],
      );
      return toToken(rows[0]!);
    },
    async findByHash(hash: string) {
      const { rows } = await query<TokenRow>(
        'tokens.byHash',
        `SELECT ${TOKEN_COLUMNS} FROM tokens WHERE hash = $1`,
        [hash],
      );
      return rows[0] && toToken(rows[0]);
    },
    async list() {
      const { rows } = await query<TokenRow>(
        'tokens.list',
        `SELECT ${TOKEN_COLUMNS} FROM tokens ORDER BY id`,
        [],
      );
      return rows.map(toToken);
    },
    async revoke(id: number, at: Date): Promise<RevokeOutcome> {
      const { rowCount } = await query(
        'tokens.revoke',
        'UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL',
        [at, id],
      );
      if ((rowCount ?? 0) > 0) return 'revoked';
      const { rows } = await query('tokens.exists', 'SELECT 1 FROM tokens WHERE id = $1', [id]);
      return rows.length === 0 ? 'not-found' : 'already-revoked';
    },
    async touch(id: number, at: Date) {
      await query('tokens.touch', 'UPDATE tokens SET last_used_at = $1 WHERE id = $2', [at, id]);
    },
  };
}
