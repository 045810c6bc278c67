import pLimit, { type LimitFunction } from 'p-limit';
import { type Log, silentLog } from '../core/log.js';
import type { Scope } from '../core/scopes.js';
import {
  generateToken,
  hashToken,
  isTokenUsable,
  type TokenRecord,
  UNSEEN_TOKEN_LOOKUPS_MAX,
  UNSEEN_TOKEN_LOOKUPS_WAITING,
} from '../core/tokens.js';
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

/** What `authenticate` gives: at once when the answer is cached, else once the store answers. */
export type Authenticated = TokenRecord | undefined | Promise<TokenRecord | undefined>;

export interface TokenServiceOptions {
  /** Dates tokens, checks their expiry and ages the cache; the wall clock by default. */
  now?: () => Date;
  log?: Log;
  /** Overrides UNSEEN_TOKEN_LOOKUPS_MAX (tests). */
  unseenLookupsMax?: number;
  /** Overrides UNSEEN_TOKEN_LOOKUPS_WAITING (tests). */
  unseenLookupsWaiting?: number;
  /** Overrides TOKEN_CACHE_MAX (tests). */
  cacheMax?: number;
}

/** Issues, checks and revokes access tokens. */
export class TokenService {
  /** When this process last saved each token's "last used" date, for the last minute. */
  private readonly lastTouched = new Map<number, number>();
  /**
   * Keyed by the token itself, not its hash: a cache hit then costs a map lookup instead
   * of a SHA-256 (the process sees every token in its requests anyway).
   */
  private readonly cache = new Map<string, { record: TokenRecord; until: number }>();
  private readonly inFlight = new Map<string, Promise<TokenRecord | undefined>>();
  /** Counts revocations made through this service, to spot a lookup that raced one. */
  private revocations = 0;
  private readonly now: () => Date;
  private readonly log: Log;
  /** Lookups of unseen tokens: so many at once, the others in line, first in first out. */
  private readonly unseenLookups: LimitFunction;
  /** Lookups of unseen tokens running and waiting, at most. */
  private readonly unseenLookupsRoom: number;
  private readonly cacheMax: number;
  /**
   * Where eviction goes on: at the oldest entry left. A new `keys()` would walk from the
   * table's start over the empty slots earlier evictions left (V8 frees them only when it
   * rebuilds the table), thousands a token at the cap.
   */
  private evictions: Iterator<string> | undefined;

  constructor(
    private readonly store: TokenStore,
    {
      now = () => new Date(),
      log = silentLog,
      unseenLookupsMax = UNSEEN_TOKEN_LOOKUPS_MAX,
      unseenLookupsWaiting = UNSEEN_TOKEN_LOOKUPS_WAITING,
      cacheMax = TOKEN_CACHE_MAX,
    }: TokenServiceOptions = {},
  ) {
    this.cacheMax = cacheMax;
    this.now = now;
    this.log = log;
    this.unseenLookups = pLimit(unseenLookupsMax);
    this.unseenLookupsRoom = unseenLookupsMax + unseenLookupsWaiting;
  }

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

  /**
   * The token's record if it exists and is neither revoked nor expired. Synchronous on
   * the hot path (a fresh cache entry, no "last used" due), so a request authenticated
   * from the cache waits on no promise.
   */
  authenticate(token: string): Authenticated {
    const now = this.now();
    const nowMs = now.getTime();
    const cached = this.cache.get(token);
    if (cached === undefined || cached.until <= nowMs) return this.lookup(token, now);
    return this.touchDue(cached.record, nowMs)
      ? this.touched(cached.record, now)
      : usable(cached.record, now);
  }

  /**
   * The token's record when the cache answers for it at once: looked up within the TTL,
   * usable, and no "last used" date due. Undefined otherwise, and `authenticate` decides.
   * The hot path of authentication: one map lookup and one clock reading.
   */
  fresh(token: string): TokenRecord | undefined {
    const cached = this.cache.get(token);
    if (cached === undefined) return undefined;
    const now = this.now();
    const nowMs = now.getTime();
    if (cached.until <= nowMs || this.touchDue(cached.record, nowMs)) return undefined;
    return usable(cached.record, now);
  }

  /**
   * Whether this process has verified the token and found it usable, as its cache says
   * (even past the cache's TTL). No I/O: lets a known client through where a guesser is
   * refused without a lookup (see the failed-authentication limit).
   */
  knownValid(token: string): boolean {
    const cached = this.cache.get(token);
    return cached !== undefined && isTokenUsable(cached.record, this.now());
  }

  /**
   * Whether `authenticate` may check `token` now: always for a token this process has
   * verified (knownValid, its cache entry fresh or due again) or one already being looked
   * up, which starts no new lookup; for another, only while its lookup could run or wait
   * (UNSEEN_TOKEN_LOOKUPS_MAX running, UNSEEN_TOKEN_LOOKUPS_WAITING waiting).
   */
  mayCheck(token: string): boolean {
    const { activeCount, pendingCount } = this.unseenLookups;
    return (
      activeCount + pendingCount < this.unseenLookupsRoom ||
      this.inFlight.has(token) ||
      this.knownValid(token)
    );
  }

  /**
   * One store query per token at a time, however many requests bring it meanwhile; the
   * stale entry stays until the answer comes, so `knownValid` keeps holding for a client
   * whose token is being re-checked.
   */
  private lookup(token: string, now: Date): Promise<TokenRecord | undefined> {
    let pending = this.inFlight.get(token);
    if (pending === undefined) {
      pending = (
        this.knownValid(token)
          ? this.fetch(token, now)
          : this.unseenLookups(() => this.fetch(token, now))
      ).finally(() => this.inFlight.delete(token));
      this.inFlight.set(token, pending);
    }
    return pending.then((record) => this.checked(record, now));
  }

  private async fetch(token: string, now: Date): Promise<TokenRecord | undefined> {
    const revocations = this.revocations;
    const record = await this.store.findByHash(hashToken(token));
    // Unknown tokens are not cached: guessing must not fill the cache. A revocation through
    // this service while the query ran may not be in its answer: don't cache that answer.
    if (record === undefined || revocations !== this.revocations) {
      this.cache.delete(token);
      return record;
    }
    this.cache.delete(token);
    if (this.cache.size >= this.cacheMax) this.evictOldest();
    this.cache.set(token, { record, until: now.getTime() + TOKEN_CACHE_TTL_MS });
    return record;
  }

  private evictOldest(): void {
    let next = this.evictions?.next();
    if (next === undefined || next.done === true) {
      this.evictions = this.cache.keys();
      next = this.evictions.next();
    }
    if (next.done !== true) this.cache.delete(next.value);
  }

  private checked(record: TokenRecord | undefined, now: Date): TokenRecord | undefined {
    if (record === undefined) return undefined;
    return this.touchDue(record, now.getTime()) ? this.touched(record, now) : usable(record, now);
  }

  private touchDue(record: TokenRecord, nowMs: number): boolean {
    const last = this.lastTouched.get(record.id) ?? record.lastUsedAt?.getTime() ?? 0;
    return nowMs - last >= LAST_USED_RESOLUTION_MS;
  }

  private touched(record: TokenRecord, now: Date): TokenRecord | undefined {
    if (usable(record, now) === undefined) return undefined;
    const nowMs = now.getTime();
    // Kept in the order of the touches (deleted, then set at the end), so that the entries
    // past the resolution, which decide nothing any more (touchDue holds for them either
    // way), leave from the front: one entry per token used in the last minute, not per
    // token ever used.
    this.lastTouched.delete(record.id);
    this.lastTouched.set(record.id, nowMs);
    for (const [id, at] of this.lastTouched) {
      if (nowMs - at < LAST_USED_RESOLUTION_MS) break;
      this.lastTouched.delete(id);
    }
    // Best effort, off the request's path: a slow or unreachable database must neither
    // fail nor delay a request over a "last used" date.
    void this.store.touch(record.id, now).catch((error: unknown) => {
      this.log.warn({ err: error, tokenId: record.id }, 'token last-used date not saved');
    });
    return record;
  }

  list(): Promise<TokenRecord[]> {
    return this.store.list();
  }

  /**
   * Revokes a token found by its hash, for whoever holds a leaked token but not its id;
   * `record` is the token as it was found.
   */
  async revokeToken(token: string): Promise<{ outcome: RevokeOutcome; record?: TokenRecord }> {
    const record = await this.store.findByHash(hashToken(token));
    if (record === undefined) return { outcome: 'not-found' };
    return { outcome: await this.revoke(record.id), record };
  }

  /** Revokes a token; through this service, it is refused from the next request on. */
  async revoke(id: number): Promise<RevokeOutcome> {
    const outcome = await this.store.revoke(id, this.now());
    this.revocations += 1;
    for (const [token, { record }] of this.cache) if (record.id === id) this.cache.delete(token);
    return outcome;
  }
}

const usable = (record: TokenRecord, now: Date): TokenRecord | undefined =>
  isTokenUsable(record, now) ? record : undefined;
