import type { Scope } from '../core/scopes.js';
import { generateToken, hashToken, isTokenUsable, type TokenRecord } from '../core/tokens.js';
import type { RevokeOutcome, TokenStore } from '../store/store.js';

/** How stale "last used" may be: recording every use would turn each read into a write. */
export const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * How long a token looked up in the database is trusted without asking again: the bound
 * on how late a revocation made elsewhere (the CLI, another instance) takes effect.
 * Expiry is checked on every use regardless.
 */
export const TOKEN_CACHE_TTL_MS = 2_000;

/** Tokens cached at most; the oldest entry makes room. */
const TOKEN_CACHE_MAX = 10_000;

export interface CreateTokenInput {
  name: string;
  scopes: Scope[];
  /** Lifetime in milliseconds; null for a token that does not expire. */
  expiresInMs: number | null;
}

/** Issues, checks and revokes access tokens. */
export class TokenService {
  private readonly lastTouched = new Map<number, number>();
  private readonly cache = new Map<string, { record: TokenRecord; until: number }>();

  constructor(
    private readonly store: TokenStore,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Returns the token itself, which is never stored and cannot be shown again. */
  async create(input: CreateTokenInput): Promise<{ token: string; record: TokenRecord }> {
    const token = generateToken();
    const createdAt = this.now();
    const expiresAt =
      input.expiresInMs === null ? null : new Date(createdAt.getTime() + input.expiresInMs);
    const record = await this.store.create({
      name: input.name,
      hash: hashToken(token),
      scopes: input.scopes,
      createdAt,
      expiresAt,
    });
    return { token, record };
  }

  /** The token's record if it exists and is neither revoked nor expired. */
  async authenticate(token: string): Promise<TokenRecord | undefined> {
    const now = this.now();
    const record = await this.lookup(hashToken(token), now.getTime());
    if (record === undefined || !isTokenUsable(record, now)) return undefined;
    const last = this.lastTouched.get(record.id) ?? record.lastUsedAt?.getTime() ?? 0;
    if (now.getTime() - last >= LAST_USED_RESOLUTION_MS) {
      this.lastTouched.set(record.id, now.getTime());
      // Best effort: a busy database must not fail a request over a "last used" date.
      await this.store.touch(record.id, now).catch(() => undefined);
    }
    return record;
  }

  /** The record of a hash, from the cache while fresh. Unknown hashes are not cached. */
  private async lookup(hash: string, now: number): Promise<TokenRecord | undefined> {
    const cached = this.cache.get(hash);
    if (cached !== undefined && cached.until > now) return cached.record;
    this.cache.delete(hash);
    const record = await this.store.findByHash(hash);
    if (record !== undefined) {
      if (this.cache.size >= TOKEN_CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(hash, { record, until: now + TOKEN_CACHE_TTL_MS });
    }
    return record;
  }

  list(): Promise<TokenRecord[]> {
    return this.store.list();
  }

  /** Revokes a token; through this service, it is refused from the next request on. */
  async revoke(id: number): Promise<RevokeOutcome> {
    const outcome = await this.store.revoke(id, this.now());
    for (const [hash, { record }] of this.cache) if (record.id === id) this.cache.delete(hash);
    return outcome;
  }
}
