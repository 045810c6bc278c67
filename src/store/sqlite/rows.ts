import type { TokenRecord } from '../../core/tokens.js';
import { scopesFromText } from '../rows.js';

// Rows as better-sqlite3 returns them with safe integers on: every INTEGER is a bigint.
export interface TokenRow {
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

export function toToken(row: TokenRow): TokenRecord {
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
