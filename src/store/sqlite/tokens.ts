import type Database from 'better-sqlite3';
import type { TokenRecord } from '../../core/tokens.js';
import { scopesFromText } from '../rows.js';
import type { NewToken, RevokeOutcome, TokenStore } from '../store.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites, guard } from './query.js';

const COLUMNS = 'id, name, hash, scopes, created_at, expires_at, last_used_at, revoked_at';

// Rows as better-sqlite3 returns them with safe integers on: every INTEGER is a bigint.
interface TokenRow {
  id: bigint;
  name: string;
  hash: string;
  scopes: string;
  created_at: bigint;
  expires_at: bigint | null;
  last_used_at: bigint | null;
  revoked_at: bigint | null;
}

const toDate = (ms: bigint | null) => (ms === null ? null : new Date(Number(ms)));

function toToken(row: TokenRow): TokenRecord {
  return {
    id: Number(row.id),
    name: row.name,
    hash: row.hash,
    scopes: scopesFromText(row.scopes),
    createdAt: toDate(row.created_at)!,
    expiresAt: toDate(row.expires_at),
    lastUsedAt: toDate(row.last_used_at),
    revokedAt: toDate(row.revoked_at),
  };
}

function prepare(db: Database.Database) {
  return {
    insert: db.prepare(
      `INSERT INTO tokens (name, hash, scopes, created_at, expires_at)
       VALUES (?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
    ),
    byHash: db.prepare(`SELECT ${COLUMNS} FROM tokens WHERE hash = ?`),
    all: db.prepare(`SELECT ${COLUMNS} FROM tokens ORDER BY id`),
    revoke: db.prepare('UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
    exists: db.prepare('SELECT 1 FROM tokens WHERE id = ?'),
    touch: db.prepare('UPDATE tokens SET last_used_at = ? WHERE id = ?'),
  };
}

export function sqliteTokens(db: Database.Database, batches: GroupCommit): TokenStore {
  const write = batchedWrites(batches);
  const { insert, byHash, all, revoke, exists, touch } = prepare(db);
  return {
    async create(token: NewToken): Promise<TokenRecord> {
      const row = guard(() =>
        insert.get(
          token.name,
          token.hash,
          token.scopes.join(' '),
          token.createdAt.getTime(),
          token.expiresAt?.getTime() ?? null,
        ),
      ) as TokenRow;
      return toToken(row);
    },
    async findByHash(hash: string) {
      const row = guard(() => byHash.get(hash)) as TokenRow | undefined;
      return row && toToken(row);
    },
    async list() {
      return (guard(() => all.all()) as TokenRow[]).map(toToken);
    },
    async revoke(id: number, at: Date): Promise<RevokeOutcome> {
      return guard(() => {
        if (revoke.run(at.getTime(), id).changes > 0) return 'revoked';
        return exists.get(id) === undefined ? 'not-found' : 'already-revoked';
      });
    },
    // Through the group commit: it shares a batch's transaction and fsync instead of
    // paying for its own.
    async touch(id: number, at: Date) {
      await write(() => touch.run(at.getTime(), id));
    },
  };
}
