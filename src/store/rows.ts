import type { AuditAction, AuditEntry } from '../core/audit.js';
import { errorCatalogue, errorNamed, statusOf } from '../core/errors.js';
import type { KeptRefusal, KeyFound } from '../core/idempotency.js';
import type { Plant, StoredPlant } from '../core/plant.js';
import { isScope, type Scope } from '../core/scopes.js';

// What both adapters share: row mapping (a row reads the same from SQLite with safe integers
// and from PostgreSQL with int8 parsed to bigint; scopes are stored alike), and the SQL
// fragments that are the same in both dialects.

export interface PlantRow {
  id: bigint;
  name: string;
  tag: string | null;
}

export function toPlant(row: PlantRow): Plant {
  return row.tag === null
    ? { id: row.id, name: row.name }
    : { id: row.id, name: row.name, tag: row.tag };
}

/** A plants row with its version (see the migration 0005_plant_versions). */
export interface StoredPlantRow extends PlantRow {
  version: bigint;
}

export function toStoredPlant(row: StoredPlantRow): StoredPlant {
  return row.tag === null
    ? { id: row.id, name: row.name, version: row.version }
    : { id: row.id, name: row.name, tag: row.tag, version: row.version };
}

/** The columns of a plant read with its version. */
export const STORED_PLANT_COLUMNS = 'id, name, tag, version';

/**
 * The version a kept answer replays when none was kept with it: the key was settled before
 * plant versions existed (schema 0005), or by an older instance during an upgrade. No plant
 * is given it (PostgreSQL counts from 1; SQLite draws 64 random bits), so a conditional
 * write with its entity tag gets 412 and the client reads the plant again.
 */
export const UNKNOWN_VERSION = 0n;

/** Scopes as stored (space-separated). Unknown ones (from a newer version) are dropped. */
export const scopesFromText = (text: string): Scope[] => text.split(' ').filter(isScope);

/** An audit_log row; `at` is read by each adapter in its own way. */
export interface AuditRow {
  seq: bigint;
  action: AuditAction;
  plant_id: bigint;
  token_id: bigint | null;
  request_id: string | null;
  before_name: string | null;
  before_tag: string | null;
  after_name: string | null;
  after_tag: string | null;
}

export const AUDIT_COLUMNS =
  'seq, at, action, plant_id, token_id, request_id, before_name, before_tag, after_name, after_tag';

// A plant's name is never NULL, so a NULL name is "no plant" (before a create, after a delete).
const plantOrNull = (id: bigint, name: string | null, tag: string | null): Plant | null =>
  name === null ? null : toPlant({ id, name, tag });

export function toAuditEntry(row: AuditRow, at: Date): AuditEntry {
  return {
    seq: row.seq,
    at,
    action: row.action,
    plantId: row.plant_id,
    tokenId: row.token_id === null ? null : Number(row.token_id),
    requestId: row.request_id,
    before: plantOrNull(row.plant_id, row.before_name, row.before_tag),
    after: plantOrNull(row.plant_id, row.after_name, row.after_tag),
  };
}

/** An idempotency_keys row as far as a claim reads it. */
export interface KeyRow {
  fingerprint: string;
  status: number | bigint | null;
  plant_id: bigint | null;
  plant_name: string | null;
  plant_tag: string | null;
  plant_version: bigint | null;
  error_code: number | bigint | null;
  error_message: string | null;
  /** Whether a claim would take the key over (see takeable), where the read says. */
  takeable?: boolean | number;
}

/** The columns a kept refusal is stored in: its status, its code and its message. */
export function refusalColumns({ name, message }: KeptRefusal): [number, number, string] {
  const kind = errorCatalogue[name];
  return [statusOf(kind), kind.code, message];
}

/** What a claim that did not take the key found instead. */
export function claimRefusal(row: KeyRow, fingerprint: string): KeyFound {
  if (row.fingerprint !== fingerprint) return { state: 'mismatch' };
  if (row.status === null) return { state: 'in-flight' };
  const status = Number(row.status);
  if (status === 201) {
    const plant = toStoredPlant({
      id: row.plant_id!,
      name: row.plant_name!,
      tag: row.plant_tag,
      version: row.plant_version ?? UNKNOWN_VERSION,
    });
    return { state: 'answered', answer: { status: 201, plant } };
  }
  // Codes are never reused for another meaning; one this version does not know (kept by a
  // newer one) is answered as what it is to us, an unexpected error.
  const name = errorNamed(Number(row.error_code)) ?? 'internal';
  return { state: 'answered', answer: { refusal: { name, message: row.error_message ?? '' } } };
}

/**
 * Whether a claim at `at` with `fingerprint` takes over the key of row `k`, in both dialects:
 * when it is expired, or held by a request that died (same body, lease over).
 */
export const takeable = (at: string, fingerprint: string) => `(k.expires_at <= ${at}
     OR (k.status IS NULL AND k.lease_until <= ${at} AND k.fingerprint = ${fingerprint}))`;

/** The columns of a key's row a claim that did not take it reads (KeyRow), from `k`. */
export const KEY_FOUND = `k.fingerprint, k.status, k.plant_id, k.plant_name, k.plant_tag,
    k.plant_version, k.error_code, k.error_message`;

/**
 * The upsert clause of a key claim, the same in both dialects (the insert aliased `k`): it
 * takes the key when it is `takeable`, and otherwise leaves the row as it is, so that
 * RETURNING gives nothing.
 */
export const TAKE_KEY = `ON CONFLICT (token_id, key) DO UPDATE SET
    fingerprint = excluded.fingerprint, created_at = excluded.created_at,
    expires_at = excluded.expires_at, lease_until = excluded.lease_until,
    status = NULL, plant_id = NULL, plant_name = NULL, plant_tag = NULL, plant_version = NULL,
    error_code = NULL, error_message = NULL
  WHERE ${takeable('excluded.created_at', 'excluded.fingerprint')}
  RETURNING 1`;
