import { createHash } from 'node:crypto';
import type { ErrorName } from './errors.js';
import type { NewPlant, StoredPlant } from './plant.js';

/** How long a key is remembered after its first use; a later reuse is a new request. */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * How long a request in flight holds its key. Far above the longest a create can take
 * (the database timeouts bound it to seconds), so the lease only matters when a process
 * died mid-request: after it, a retry takes the key over instead of waiting a day.
 */
export const IDEMPOTENCY_LEASE_MS = 60_000;

export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

// An sf-string (RFC 9651 §3.3.3): printable ASCII in quotes, with \" and \\ escapes.
const SF_STRING = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/;
// Many clients send the key bare, as Stripe's API taught them: accepted as the same key.
const BARE = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/**
 * The key of an `Idempotency-Key` header: a structured-field String as the IETF draft
 * specifies (`"8e03978e-..."`), or the same characters unquoted. Undefined when the
 * header is malformed, empty or longer than the limit.
 */
export function parseIdempotencyKey(header: string): string | undefined {
  const quoted = SF_STRING.exec(header);
  const key = quoted ? quoted[1]!.replace(/\\(["\\])/g, '$1') : BARE.test(header) ? header : '';
  return key.length > 0 && key.length <= IDEMPOTENCY_KEY_MAX_LENGTH ? key : undefined;
}

/**
 * What identifies "the same request" for a key: the plant asked for, not the bytes that
 * carried it, so a retry that reformats or reorders the JSON is still the same request.
 */
export function fingerprintOf(plant: NewPlant): string {
  const canonical = JSON.stringify([plant.id?.toString() ?? null, plant.name, plant.tag ?? null]);
  return createHash('sha256').update(canonical).digest('base64url');
}

/**
 * A refusal kept for a key: its name in the catalogue and its message. The code and the
 * status follow from the name, so a replay is the same ApiError the first request got.
 */
export interface KeptRefusal {
  name: ErrorName;
  message: string;
}

/**
 * The answer a key's first request got, replayed to every retry: the plant created, with
 * the version it had then (its entity tag), or the refusal.
 */
export type KeptAnswer = { status: 201; plant: StoredPlant } | { refusal: KeptRefusal };

/** A key to take for a create: the caller's, within the token that sent it. */
export interface IdempotencyClaim {
  tokenId: number;
  key: string;
  fingerprint: string;
  at: Date;
}

export type ClaimOutcome =
  /** The key is this request's now: go ahead, and settle it. */
  | { state: 'claimed' }
  /** The key was first used with another request body. */
  | { state: 'mismatch' }
  /** The first request with this key is still being answered. */
  | { state: 'in-flight' }
  /** The first request was answered: replay its answer. */
  | { state: 'answered'; answer: KeptAnswer };

/** When a key claimed at `at` expires, and until when its request holds it (Unix ms). */
export function keyDeadlines(at: Date): { expiresAt: number; leaseUntil: number } {
  const now = at.getTime();
  return { expiresAt: now + IDEMPOTENCY_KEY_TTL_MS, leaseUntil: now + IDEMPOTENCY_LEASE_MS };
}

/** What a claim found when the key was not its to take. */
export type KeyFound = Exclude<ClaimOutcome, { state: 'claimed' }>;

/** Identifies a claimed key to the write that settles it. */
export interface ClaimedKey {
  tokenId: number;
  key: string;
}
