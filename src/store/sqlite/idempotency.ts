import type Database from 'better-sqlite3';
import {
  type ClaimedKey,
  type ClaimOutcome,
  type IdempotencyClaim,
  type KeptRefusal,
  keyDeadlines,
} from '../../core/idempotency.js';
import { claimRefusal, KEY_FOUND, type KeyRow, refusalColumns, TAKE_KEY } from '../rows.js';
import type { IdempotencyStore } from '../store.js';
import type { GroupCommit } from './group-commit.js';
import { batchedWrites } from './query.js';

function prepare(db: Database.Database) {
  return {
    // A new key is inserted, an expired or abandoned one taken over (TAKE_KEY). Expired keys
    // of others are the maintenance loop's, as on PostgreSQL (see there why).
    take: db.prepare(
      `INSERT INTO idempotency_keys AS k
         (token_id, key, fingerprint, created_at, expires_at, lease_until)
       VALUES (@tokenId, @key, @fingerprint, @at, @expiresAt, @leaseUntil)
       ${TAKE_KEY}`,
    ),
    read: db.prepare(
      `SELECT ${KEY_FOUND} FROM idempotency_keys k WHERE k.token_id = ? AND k.key = ?`,
    ),
    // Up to a number of keys expired at a time: a maintenance round's batch.
    prune: db.prepare(
      `DELETE FROM idempotency_keys WHERE rowid IN
         (SELECT rowid FROM idempotency_keys WHERE expires_at <= ? LIMIT ?)`,
    ),
    settle: db.prepare(
      `UPDATE idempotency_keys SET status = ?, error_code = ?, error_message = ?
       WHERE token_id = ? AND key = ? AND status IS NULL`,
    ),
    release: db.prepare(
      'DELETE FROM idempotency_keys WHERE token_id = ? AND key = ? AND status IS NULL',
    ),
  };
}

type Statements = ReturnType<typeof prepare>;

export function sqliteIdempotency(db: Database.Database, batches: GroupCommit): IdempotencyStore {
  const write = batchedWrites(batches);
  const statements = prepare(db);
  return {
    claim: (request: IdempotencyClaim) => write(() => claim(statements, request)),
    settle: ({ tokenId, key }: ClaimedKey, refusal: KeptRefusal) =>
      write(() => void statements.settle.run(...refusalColumns(refusal), tokenId, key)),
    release: ({ tokenId, key }: ClaimedKey) =>
      write(() => void statements.release.run(tokenId, key)),
    prune: (now: Date, batch: number) =>
      write(() => statements.prune.run(now.getTime(), batch).changes),
  };
}

function claim(
  { take, read }: Statements,
  { tokenId, key, fingerprint, at }: IdempotencyClaim,
): ClaimOutcome {
  const taken = take.get({ tokenId, key, fingerprint, at: at.getTime(), ...keyDeadlines(at) });
  if (taken !== undefined) return { state: 'claimed' };
  return claimRefusal(read.get(tokenId, key) as KeyRow, fingerprint);
}
