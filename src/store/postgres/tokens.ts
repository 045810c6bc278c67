import type { TokenRecord } from '../../core/tokens.js';
import { scopesFromText } from '../rows.js';
import type { NewToken, RevokeOutcome, TokenStore } from '../store.js';
import type { Query } from './query.js';

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

export function postgresTokens(query: Query): TokenStore {
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
    revoke: (id, at) => revoke(query, id, at),
    async touch(id: number, at: Date) {
      await query('tokens.touch', 'UPDATE tokens SET last_used_at = $1 WHERE id = $2', [at, id]);
    },
  };
}

async function revoke(query: Query, id: number, at: Date): Promise<RevokeOutcome> {
  const { rowCount } = await query(
    'tokens.revoke',
    'UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL',
    [at, id],
  );
  if ((rowCount ?? 0) > 0) return 'revoked';
  const { rows } = await query('tokens.exists', 'SELECT 1 FROM tokens WHERE id = $1', [id]);
  return rows.length === 0 ? 'not-found' : 'already-revoked';
}
