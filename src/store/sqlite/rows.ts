import type { Plant } from '../../core/plant.js';
import { isScope, type Scope } from '../../core/scopes.js';
import type { TokenRecord } from '../../core/tokens.js';

// Rows as better-sqlite3 returns them with safe integers on: every INTEGER is a bigint.
export interface PlantRow {
  id: bigint;
  name: string;
  tag: string | null;
}

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

export function toPlant(row: PlantRow): Plant {
  return row.tag === null
    ? { id: row.id, name: row.name }
    : { id: row.id, name: row.name, tag: row.tag };
}

const toDate = (ms: bigint | null) => (ms === null ? null : new Date(Number(ms)));

export function toToken(row: TokenRow): TokenRecord {
  return {
    id: Number(row.id),
    name: row.name,
    hash: row.hash,
    // Unknown scopes (from a newer version) are dropped rather than trusted.
    scopes: row.scopes.split(' ').filter(isScope) as Scope[],
    createdAt: toDate(row.created_at)!,
    expiresAt: toDate(row.expires_at),
    lastUsedAt: toDate(row.last_used_at),
    revokedAt: toDate(row.revoked_at),
  };
}
