import pg from 'pg';
import { parseIntoClientConfig } from 'pg-connection-string';
import type { AuditQuery, WriteOrigin } from '../../core/audit.js';
import type { ErrorBody } from '../../core/errors.js';
import {
  type ClaimedKey,
  IDEMPOTENCY_KEY_TTL_MS,
  IDEMPOTENCY_LEASE_MS,
  type IdempotencyClaim,
} from '../../core/idempotency.js';
import { INT64_MIN } from '../../core/int64.js';
import type { NewPlant, Plant, PlantChange, PlantQuery } from '../../core/plant.js';
import type { TokenRecord } from '../../core/tokens.js';
import { loadMigrations } from '../migrations.js';
import {
  AUDIT_COLUMNS,
  type AuditRow,
  claimRefusal,
  type KeyRow,
  type PlantRow,
  scopesFromText,
  TAKE_KEY,
  toAuditEntry,
  toPlant,
} from '../rows.js';
import {
  type AuditStore,
  type ConditionalWriteOptions,
  type Durability,
  type IdempotencyStore,
  IdsExhaustedError,
  type InsertOptions,
  KeyNotHeldError,
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
import { CONNECT_TIMEOUT_MS, DEFAULT_POOL_SIZE, STATEMENT_TIMEOUT_MS } from './timeouts.js';
import { postgresRateLimits } from './rate-limits.js';

export interface PostgresOptions {
  /** A `postgres://` or `postgresql://` connection URL. */
  url: string;
  durability?: Durability;
  /** Connections this process keeps at most. */
  poolSize?: number;
}

const INT8_OID = 20;

// int8 arrives as text; turn it into a bigint, never a number, in this pool only.
const types = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8_OID && format !== 'binary'
      ? (text: string) => BigInt(text)
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/**
 * The connection configuration of a URL, with the settings every connection starts with
 * added to its `options` (after any the URL gives, so these win). They travel in the
 * connection's startup packet: no query of their own, nothing to fail half-way. Every
 * statement here is one autocommit statement written for READ COMMITTED: a stricter default
 * on the database would turn concurrent creates into 40001s. With --durability process, a
 * commit is answered before its WAL is flushed: PostgreSQL's own way of leaving the flush
 * for later (the last commits may be lost, never corrupted).
 */
export function connectionConfig(url: string, durability: Durability): pg.ClientConfig {
  // Parsed as pg parses it: a URL such as postgres://app@/db?host=/run/postgresql is valid.
  const config = parseIntoClientConfig(url);
  // Spaces separate the settings; a space within one is escaped.
  const settings = ['-c default_transaction_isolation=read\\ committed'];
  if (durability === 'process') settings.push('-c synchronous_commit=off');
  return { ...config, options: [config.options, ...settings].filter(Boolean).join(' ') };
}

/** Opens a pool on the database, migrating it first (under a lock, see migrate.ts). */
export async function openPostgresStore({
  url,
  durability = 'power',
  poolSize = DEFAULT_POOL_SIZE,
}: PostgresOptions): Promise<Store> {
  const migration = await migratePostgres(url, loadMigrations('postgres'));
  const pool = new pg.Pool({
    ...connectionConfig(url, durability),
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
  const query = <R extends pg.QueryResultRow>(name: string, text: string, values: unknown[]) =>
    guard(() => pool.query<R>({ name, text, values }));
  let closed = false;
  return {
    plants: postgresPlants(query),
    tokens: postgresTokens(query),
    audit: postgresAudit(query),
    idempotency: postgresIdempotency(query),
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

// Every write below is one statement: the change, its audit entry (and the settling of an
// Idempotency-Key) commit together or not at all, in one round trip.
const AUDIT_INSERT = `INSERT INTO audit_log (at, action, plant_id, token_id, request_id,
  before_name, before_tag, after_name, after_tag)`;

// A create with an Idempotency-Key ($6, $7: null for none) runs only while its request still
// holds the key: `held` locks the key's row, so a release or takeover waits for this
// statement, and `allowed` says whether to create at all.
const KEY_HELD = `held AS (
    SELECT 1 FROM idempotency_keys
    WHERE token_id = $6::bigint AND key = $7::text AND status IS NULL FOR UPDATE),
  allowed AS (SELECT $7::text IS NULL OR EXISTS (SELECT 1 FROM held) AS ok)`;

// The create's audit entry and the settling of its key, then the created plant (none if
// nothing was created) and whether the key was held.
const AFTER_CREATE = `audited AS (
    ${AUDIT_INSERT}
    SELECT $3::timestamptz, 'create', id, $4::bigint, $5::text, NULL, NULL, name, tag FROM created),
  settled AS (
    UPDATE idempotency_keys k SET status = 201, plant_id = c.id, plant_name = c.name,
      plant_tag = c.tag
    FROM created c WHERE k.token_id = $6::bigint AND k.key = $7::text AND k.status IS NULL)
  SELECT c.id, c.name, c.tag, a.ok AS allowed FROM allowed a LEFT JOIN created c ON true`;

/** What a create answers: the plant if one was created. */
interface CreateRow extends Partial<PlantRow> {
  allowed: boolean;
}

/** The parameters AFTER_CREATE and the other audited writes take, from the write's options. */
const origin = (by: WriteOrigin | undefined) => [
  new Date(),
  by?.tokenId ?? null,
  by?.requestId ?? null,
];

/**
 * `old` locks the plant and reads it as it is now, which is the audit's "before"; the
 * conditional forms compare it with the plant the caller expects ($n, $n+1).
 */
const LOCK_OLD = `old AS (SELECT ${COLUMNS} FROM plants WHERE id = $1 FOR UPDATE)`;
const unchanged = (n: number) => `AND old.name = $${n} AND old.tag IS NOT DISTINCT FROM $${n + 1}`;

/** Found the plant locked (`old_id`) but wrote nothing: the expected plant had changed. */
interface WriteRow extends Partial<PlantRow> {
  old_id: bigint;
}

/** The plant a create made, or why it made none. */
function created(row: CreateRow, refusal: () => Error): Plant {
  if (!row.allowed) throw new KeyNotHeldError();
  if (row.id === null || row.id === undefined) throw refusal();
  return toPlant(row as PlantRow);
}

function postgresPlants(query: Query): PlantStore {
  const page = (where: string) => `SELECT ${COLUMNS} FROM plants ${where} ORDER BY id LIMIT $1`;
  const updateSql = (conditional: boolean) => `WITH ${LOCK_OLD},
    changed AS (
      UPDATE plants p SET name = coalesce($2::text, p.name),
        tag = CASE WHEN $3::boolean THEN $4::text ELSE p.tag END
      FROM old WHERE p.id = old.id ${conditional ? unchanged(8) : ''}
      RETURNING p.id, p.name, p.tag, old.name AS old_name, old.tag AS old_tag),
    audited AS (
      ${AUDIT_INSERT}
      SELECT $5::timestamptz, 'update', id, $6::bigint, $7::text, old_name, old_tag, name, tag
      FROM changed)
    SELECT old.id AS old_id, c.id, c.name, c.tag FROM old LEFT JOIN changed c ON true`;
  const deleteSql = (conditional: boolean) => `WITH ${LOCK_OLD},
    gone AS (
      DELETE FROM plants p USING old WHERE p.id = old.id ${conditional ? unchanged(5) : ''}
      RETURNING p.id, p.name, p.tag),
    audited AS (
      ${AUDIT_INSERT}
      SELECT $2::timestamptz, 'delete', id, $3::bigint, $4::text, name, tag, NULL, NULL
      FROM gone)
    SELECT old.id AS old_id, g.id FROM old LEFT JOIN gone g ON true`;

  return {
    async insert({ id, name, tag }: NewPlant, { by, idempotencyKey }: InsertOptions = {}) {
      const after = [...origin(by), idempotencyKey?.tokenId ?? null, idempotencyKey?.key ?? null];
      if (id === undefined) {
        const { rows } = await query<CreateRow>(
          'plants.insertNew',
          `WITH ${KEY_HELD},
           next AS (
             UPDATE plant_ids SET high = high + 1
             WHERE high < 9223372036854775807 AND (SELECT ok FROM allowed) RETURNING high),
           created AS (
             INSERT INTO plants (id, name, tag) SELECT high, $1, $2 FROM next
             RETURNING ${COLUMNS}),
           ${AFTER_CREATE}`,
          [name, tag ?? null, ...after],
        );
        return created(rows[0]!, () => new IdsExhaustedError());
      }
      // The INSERT reads from `bump`, so the plant_ids row is locked before the plants
      // row: the same order as above (see the migration).
      const { rows } = await query<CreateRow>(
        'plants.insertWithId',
        `WITH ${KEY_HELD},
         bump AS (
           UPDATE plant_ids SET high = greatest(high, $8::bigint)
           WHERE (SELECT ok FROM allowed) RETURNING high),
         created AS (
           INSERT INTO plants (id, name, tag) SELECT $8::bigint, $1, $2 FROM bump
           ON CONFLICT (id) DO NOTHING
           RETURNING ${COLUMNS}),
         ${AFTER_CREATE}`,
        [name, tag ?? null, ...after, id.toString()],
      );
      return created(rows[0]!, () => new PlantExistsError(id));
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
    async update(id: bigint, change: PlantChange, { expected, by }: ConditionalWriteOptions = {}) {
      const values = [
        id.toString(),
        change.name ?? null,
        change.tag !== undefined,
        change.tag ?? null,
        ...origin(by),
      ];
      const { rows } =
        expected === undefined
          ? await query<WriteRow>('plants.update', updateSql(false), values)
          : await query<WriteRow>('plants.updateIf', updateSql(true), [
              ...values,
              expected.name,
              expected.tag ?? null,
            ]);
      const row = rows[0];
      if (row === undefined) return undefined;
      if (row.id === null || row.id === undefined) throw new PlantChangedError(id);
      return toPlant(row as PlantRow);
    },
    async delete(id: bigint, { expected, by }: ConditionalWriteOptions = {}) {
      const values = [id.toString(), ...origin(by)];
      const { rows } =
        expected === undefined
          ? await query<WriteRow>('plants.delete', deleteSql(false), values)
          : await query<WriteRow>('plants.deleteIf', deleteSql(true), [
              ...values,
              expected.name,
              expected.tag ?? null,
            ]);
      const row = rows[0];
      if (row === undefined) return false;
      if (row.id === null || row.id === undefined) throw new PlantChangedError(id);
      return true;
    },
  };
}

function postgresAudit(query: Query): AuditStore {
  return {
    async list({ since, plantId, afterSeq, limit }: AuditQuery) {
      const values: unknown[] = [(afterSeq ?? INT64_MIN).toString(), limit];
      const where = ['seq > $1'];
      if (since !== undefined) where.push(`at >= $${values.push(since)}`);
      if (plantId !== undefined) where.push(`plant_id = $${values.push(plantId.toString())}`);
      const { rows } = await query<AuditRow & { at: Date }>(
        `audit.list.${since !== undefined}.${plantId !== undefined}`,
        `SELECT ${AUDIT_COLUMNS} FROM audit_log WHERE ${where.join(' AND ')}
         ORDER BY seq LIMIT $2`,
        values,
      );
      return rows.map((row) => toAuditEntry(row, row.at));
    },
  };
}

/** Expired keys one claim deletes at most: keeps the table from growing without a job. */
const PURGE_BATCH = 100;

function postgresIdempotency(query: Query): IdempotencyStore {
  return {
    async claim({ tokenId, key, fingerprint, at }: IdempotencyClaim) {
      const expiresAt = new Date(at.getTime() + IDEMPOTENCY_KEY_TTL_MS);
      const leaseUntil = new Date(at.getTime() + IDEMPOTENCY_LEASE_MS);
      // A new key is inserted, an expired or abandoned one taken over (TAKE_KEY). A few
      // expired keys of others go on the way, skipping locked ones.
      const { rows } = await query(
        'idempotency.claim',
        `WITH purged AS (
           DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM idempotency_keys
             WHERE expires_at <= $4 AND NOT (token_id = $1 AND key = $2)
             LIMIT ${PURGE_BATCH} FOR UPDATE SKIP LOCKED)))
         INSERT INTO idempotency_keys AS k
           (token_id, key, fingerprint, created_at, expires_at, lease_until)
         VALUES ($1, $2, $3, $4, $5, $6)
         ${TAKE_KEY}`,
        [tokenId, key, fingerprint, at, expiresAt, leaseUntil],
      );
      if (rows.length > 0) return { state: 'claimed' } as const;
      const found = await query<KeyRow>(
        'idempotency.read',
        `SELECT fingerprint, status, plant_id, plant_name, plant_tag, error_code, error_message
         FROM idempotency_keys WHERE token_id = $1 AND key = $2`,
        [tokenId, key],
      );
      // Gone between the two statements (released by its request): try again.
      if (found.rows[0] === undefined) return this.claim({ tokenId, key, fingerprint, at });
      return claimRefusal(found.rows[0], fingerprint);
    },
    async settle({ tokenId, key }: ClaimedKey, status: number, error: ErrorBody) {
      await query(
        'idempotency.settle',
        `UPDATE idempotency_keys SET status = $3, error_code = $4, error_message = $5
         WHERE token_id = $1 AND key = $2 AND status IS NULL`,
        [tokenId, key, status, error.error, error.message],
      );
    },
    async release({ tokenId, key }: ClaimedKey) {
      await query(
        'idempotency.release',
        'DELETE FROM idempotency_keys WHERE token_id = $1 AND key = $2 AND status IS NULL',
        [tokenId, key],
      );
    },
  };
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
