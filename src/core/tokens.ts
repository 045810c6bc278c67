import { createHash, randomBytes } from 'node:crypto';
import type { Scope } from './scopes.js';

/** Every token starts with this, so leaked tokens are easy to spot and grep for. */
export const TOKEN_PREFIX = 'pst_';

/** What generateToken makes: the prefix, then 256 bits in base64url. */
export const TOKEN_FORMAT = /^pst_[A-Za-z0-9_-]{43}$/;

/** What the store keeps of a token: never the token itself, only its hash. */
export interface TokenRecord {
  id: number;
  name: string;
  hash: string;
  scopes: Scope[];
  createdAt: Date;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

/** A new token: 256 random bits, base64url, behind the prefix. */
export function generateToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

// Tokens carry 256 random bits, so a fast unsalted hash is enough: there is no
// dictionary to attack, and lookups by hash need no constant-time comparison.
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export function isTokenUsable(token: TokenRecord, now: Date): boolean {
  if (token.revokedAt !== null) return false;
  return token.expiresAt === null || token.expiresAt.getTime() > now.getTime();
}

// RFC 6750 §2.1: the scheme (case-insensitive, RFC 9110 §11.1), 1*SP, then a b64token.
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*)$/i;

/** The token of an `Authorization: Bearer ...` value, or undefined if it is not one. */
export function parseBearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return BEARER.exec(header)?.[1];
}

const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;
const DURATION = /^([1-9][0-9]{0,8})([smhdw])$/;

/**
 * Parses a lifetime such as `90s`, `15m`, `12h`, `30d` or `8w` into milliseconds.
 * Throws with a message a user can act on.
 */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text);
  if (match === null) {
    throw new Error(`"${text}" is not a duration; use a number and a unit: 90s, 15m, 12h, 30d, 8w`);
  }
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  if (ms > 100 * 365 * UNIT_MS.d) throw new Error(`"${text}" is longer than 100 years`);
  return ms;
}

/**
 * Lookups of tokens this process has not verified that run at once; up to
 * UNSEEN_TOKEN_LOOKUPS_WAITING more wait their turn, and past that such a token is not looked
 * up (TokenService.mayCheck). Tokens it has verified are looked up regardless. So a flood of
 * guesses keeps at most this many of the store's connections (the PostgreSQL pool has 10 by
 * default) and queries ahead of the other clients' (a lookup is one indexed read), and a new
 * client waits in line with the flood rather than being refused, unless the line is full.
 */
export const UNSEEN_TOKEN_LOOKUPS_MAX = 8;

/** Lookups of unseen tokens that may wait for one of UNSEEN_TOKEN_LOOKUPS_MAX. */
export const UNSEEN_TOKEN_LOOKUPS_WAITING = 1_024;
