// What both adapters share for the changes feed: an audit entry read as an event.
import type { AuditAction } from '../core/audit.js';
import type { ChangeEvent } from '../core/change-events.js';
import { plantPayload, type WebhookEvent } from '../core/webhooks/events.js';
import type { TimeReader } from './webhook-rows.js';

export const EVENT_COLUMNS =
  'seq, action, at, plant_id, before_name, before_tag, after_name, after_tag';

export interface EventRow {
  seq: bigint;
  action: AuditAction;
  at: unknown;
  plant_id: bigint;
  before_name: string | null;
  before_tag: string | null;
  after_name: string | null;
  after_tag: string | null;
}

const TYPES: Record<AuditAction, WebhookEvent> = {
  create: 'plant.created',
  update: 'plant.updated',
  delete: 'plant.deleted',
};

/**
 * The event of an audit entry: its position is the entry's seq, its data the plant as the
 * webhook message of the same change has it (after the write; before it, for a delete).
 */
export function toChangeEvent(row: EventRow, time: TimeReader): ChangeEvent {
  const deleted = row.action === 'delete';
  const name = (deleted ? row.before_name : row.after_name) ?? '';
  const tag = deleted ? row.before_tag : row.after_tag;
  return {
    position: row.seq,
    type: TYPES[row.action],
    at: time(row.at),
    data: plantPayload({ id: row.plant_id, name, ...(tag !== null && { tag }) }),
  };
}
