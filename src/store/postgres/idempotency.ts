import {
  type ClaimedKey,
  type IdempotencyClaim,
  type KeptRefusal,
  keyDeadlines,
} from '../../core/idempotency.js';
import { claimRefusal, KEY_FOUND, type KeyRow, refusalColumns, TAKE_KEY } from '../rows.js';
import type { IdempotencyStore } from '../store.js';
import type { Query } from './query.js';

// A new key is inserted, an expired or abandoned one taken over (TAKE_KEY). Nothing else:
// expired keys of others are the maintenance loop's (service/maintenance.ts). A claim that
// also deleted a few on its way read them in a plan PostgreSQL settled on while the table
// was new and small, a scan of the whole table, and kept it: each create with a key then
// read every key of the day (13 ms a claim at 30,000 keys).
const CLAIM = `INSERT INTO idempotency_keys AS k
    (token_id, key, fingerprint, created_at, expires_at, lease_until)
  VALUES ($1, $2, $3, $4, $5, $6)
  ${TAKE_KEY}`;

const READ_KEY = `SELECT ${KEY_FOUND} FROM idempotency_keys k WHERE k.token_id = $1 AND k.key = $2`;

export function postgresIdempotency(query: Query): IdempotencyStore {
  return {
    async claim({ tokenId, key, fingerprint, at }: IdempotencyClaim) {
      const { expiresAt, leaseUntil } = keyDeadlines(at);
      const { rows } = await query('idempotency.claim', CLAIM, [
        tokenId,
        key,
        fingerprint,
        at,
        new Date(expiresAt),
        new Date(leaseUntil),
      ]);
      if (rows.length > 0) return { state: 'claimed' } as const;
      const found = await query<KeyRow>('idempotency.read', READ_KEY, [tokenId, key]);
      // Gone between the two statements (released by its request): try again.
      if (found.rows[0] === undefined) return this.claim({ tokenId, key, fingerprint, at });
      return claimRefusal(found.rows[0], fingerprint);
    },
    async settle({ tokenId, key }: ClaimedKey, refusal: KeptRefusal) {
      await query(
        'idempotency.settle',
        `UPDATE idempotency_keys SET status = $3, error_code = $4, error_message = $5
         WHERE token_id = $1 AND key = $2 AND status IS NULL`,
        [tokenId, key, ...refusalColumns(refusal)],
      );
    },
    async release({ tokenId, key }: ClaimedKey) {
      await query(
        'idempotency.release',
        'DELETE FROM idempotency_keys WHERE token_id = $1 AND key = $2 AND status IS NULL',
        [tokenId, key],
      );
    },
    async prune(now: Date, batch: number) {
      // Keys a claim holds (taking one over) are skipped: the claim decides about them.
      // Planned each time: prepared, its plan would be the one for the table the first rounds
      // saw, small enough to read whole, and the rounds after would read it whole.
      const { rowCount } = await query(
        'idempotency.prune',
        `DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM idempotency_keys WHERE expires_at <= $1
           ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
        [now, batch],
        { planEachTime: true },
      );
      return rowCount ?? 0;
    },
  };
}
