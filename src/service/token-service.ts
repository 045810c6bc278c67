import type { Scope } from '../core/scopes.js';
import { generateToken, hashToken, isTokenUsable, type TokenRecord } from '../core/tokens.js';
import type { RevokeOutcome, TokenStore } from '../store/store.js';

/** How stale "last used" may be: recording every use would turn each read into a write. */
export const LAST_USED_RESOLUTION_MS = 60_000;

export interface CreateTokenInput {
  name: string;
  scopes: Scope[];
  /** Lifetime in milliseconds; null for a token that does not expire. */
  expiresInMs: number | null;
}

/** Issues, checks and revokes access tokens. */
export class TokenService {
  private readonly lastTouched = new Map<number, number>();

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
    const record = await this.store.findByHash(hashToken(token));
    const now = this.now();
    if (record === undefined || !isTokenUsable(record, now)) return undefined;
    const last = this.lastTouched.get(record.id) ?? record.lastUsedAt?.getTime() ?? 0;
    if (now.getTime() - last >= LAST_USED_RESOLUTION_MS) {
      this.lastTouched.set(record.id, now.getTime());
      // Best effort: a busy database must not fail a request over a "last used" date.
      await this.store.touch(record.id, now).catch(() => undefined);
    }
    return record;
  }

  list(): Promise<TokenRecord[]> {
    return this.store.list();
  }

  revoke(id: number): Promise<RevokeOutcome> {
    return this.store.revoke(id, this.now());
  }
}
