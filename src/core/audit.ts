import type { Plant } from './plant.js';

export type AuditAction = 'create' | 'update' | 'delete';

/**
 * Who asked for a write. Recorded with the write itself; either may be unknown for a
 * write that did not come through the API.
 */
export interface WriteOrigin {
  tokenId?: number;
  requestId?: string;
}

/** One recorded write: the plant as it was before and after (absent on create / delete). */
export interface AuditEntry {
  /** Position in the trail: increases with every write, across instances. */
  seq: bigint;
  at: Date;
  action: AuditAction;
  plantId: bigint;
  tokenId: number | null;
  requestId: string | null;
  before: Plant | null;
  after: Plant | null;
}

/** A page of the trail in write order: entries after `afterSeq`, optionally filtered. */
export interface AuditQuery {
  since?: Date;
  plantId?: bigint;
  afterSeq?: bigint;
  limit: number;
}
