import type { AuditEntry, AuditQuery, WriteOrigin } from '../core/audit.js';
import type {
  ClaimedKey,
  ClaimOutcome,
  IdempotencyClaim,
  KeptRefusal,
  KeyFound,
} from '../core/idempotency.js';
import type { NewPlant, PlantChange, PlantQuery, StoredPlant } from '../core/plant.js';
import type { Scope } from '../core/scopes.js';
import type { TokenRecord } from '../core/tokens.js';
import type { MigrationReport } from './migrations.js';
import type { EventLog } from './event-log.js';
import type { WebhookEvents, WebhookQueue, WebhookStore } from './webhook-store.js';

export type * from './event-log.js';
export type * from './webhook-store.js';

/**
 * `power`: a write is answered only once it is on disk (fsynced), so it survives power
 * loss. `process`: the flush is left to the OS (SQLite synchronous=NORMAL, PostgreSQL
 * synchronous_commit=off); a write survives the process being killed, but the last
 * moments of writes may be lost to a power cut.
 */
export type Durability = 'power' | 'process';

/** Options of every plant write. */
export interface WriteOptions {
  /** Who asked for the write, for its audit entry. */
  by?: WriteOrigin;
}

export interface InsertOptions extends WriteOptions {
  /** A claimed Idempotency-Key to settle with the created plant, in the same transaction. */
  idempotencyKey?: ClaimedKey;
}

export interface KeyedInsertOptions extends WriteOptions {
  /** The Idempotency-Key the create comes with, as a claim would take it. */
  claim: IdempotencyClaim;
}

/** What PlantStore.insertWithKey did. */
export type KeyedInsert =
  { state: 'created'; plant: StoredPlant } | KeyFound | { state: 'long-way' };

/** PlantStore.insertWithKey wrote nothing: the key is the long way's to take. */
export const LONG_WAY = { state: 'long-way' } as const;

export interface ConditionalWriteOptions extends WriteOptions {
  /**
   * Write only if the plant still has this one's version, else PlantChangedError (same
   * check, same transaction: a compare-and-set).
   */
  expected?: StoredPlant;
}

/**
 * A page of plants as the JSON text of the list's answer: an array of plants in id order,
 * each as plantPayload (core/webhooks/events.ts) writes it, ids exact. SQLite builds it in the
 * query: one row instead of a row, an object and a BigInt per plant, and no serializer after
 * it, which cut the CPU of a 100-plant list by about 40% (bench/HISTORY.md). PostgreSQL reads
 * the rows and writes the text from them, which leaves the database's work as it was.
 */
export interface PlantListing {
  json: string;
  /** The last plant's id, when a plant follows the page (the next page starts after it). */
  next?: bigint;
}

/**
 * The persistence contract every database adapter implements (see
 * test/store/store-contract.ts, which runs the same suite against each adapter).
 * Adapters throw the errors below for expected outcomes, never database errors.
 * Every write that changes a plant adds its audit entry in the same transaction, and gives
 * the plant a new version (see StoredPlant); a list answers plants without versions.
 */
export interface PlantStore {
  /**
   * Without an id, assigns one that no plant has or ever had, whoever chose it (see
   * docs/decisions.md §12). Throws PlantExistsError if the id given is in use,
   * IdsExhaustedError if no id is left to assign, and KeyNotHeldError, creating nothing, if
   * `idempotencyKey` is no longer claimed.
   */
  insert(plant: NewPlant, options?: InsertOptions): Promise<StoredPlant>;
  /**
   * A create with an Idempotency-Key, in one transaction: a key the store has not seen is
   * kept with the plant created (`created`); a key seen before is answered as a claim finds it
   * (`answered`, `mismatch`, `in-flight`), creating nothing. Anything else writes nothing and
   * answers `long-way`: a key to take over (expired, or its request died), a create refused
   * (PlantExistsError, IdsExhaustedError), or a key another request took meanwhile; the caller
   * then claims the key, inserts and settles (IdempotencyStore), which tells those cases apart.
   * Most keyed creates are a new key and a create that succeeds, or the retry of one (an
   * import's lines, run again): one transaction each, not two.
   */
  insertWithKey(plant: NewPlant, options: KeyedInsertOptions): Promise<KeyedInsert>;
  /**
   * The plant, at once where the store reads without waiting (SQLite): a read answered
   * from a value costs no promise on the way back to the socket (see getPlant's route).
   * Otherwise a native Promise: callers tell the two apart with `instanceof Promise`.
   */
  get(id: bigint): StoredPlant | undefined | Promise<StoredPlant | undefined>;
  /** Up to `limit` plants in id order, after `after`, of `tag` (see PlantListing). */
  list(query: PlantQuery): Promise<PlantListing>;
  /** Applies the change atomically; undefined when no plant has the id. */
  update(
    id: bigint,
    change: PlantChange,
    options?: ConditionalWriteOptions,
  ): Promise<StoredPlant | undefined>;
  /** True when a plant was deleted, false when none had the id. */
  delete(id: bigint, options?: ConditionalWriteOptions): Promise<boolean>;
}

/** The trail of plant writes (see core/audit.ts); written by PlantStore, read here. */
export interface AuditStore {
  list(query: AuditQuery): Promise<AuditEntry[]>;
  /**
   * Deletes up to `batch` of the oldest entries written before `before`; answers how many it
   * deleted (fewer than `batch`: none older is left). A batch at a time, so that a prune of a
   * large trail never holds the database for long.
   */
  prune(before: Date, batch: number): Promise<number>;
}

/**
 * Idempotency-Key records of creates, the long way: most keyed creates take their key in
 * their own transaction (PlantStore.insertWithKey); the others claim it here before the
 * create runs, the create settles it with its plant (PlantStore.insert), a refusal with
 * `settle`, and a failure without a definite answer frees it with `release`.
 */
export interface IdempotencyStore {
  claim(claim: IdempotencyClaim): Promise<ClaimOutcome>;
  settle(key: ClaimedKey, refusal: KeptRefusal): Promise<void>;
  release(key: ClaimedKey): Promise<void>;
  /**
   * Deletes up to `batch` keys expired at `now`; answers how many (fewer than `batch`: none
   * is left). The maintenance loop's: claims delete no key but the one they take over, so
   * this alone keeps the table to a day's keys.
   */
  prune(now: Date, batch: number): Promise<number>;
}

export interface NewToken {
  name: string;
  hash: string;
  scopes: Scope[];
  createdAt: Date;
  expiresAt: Date | null;
}

export type RevokeOutcome = 'revoked' | 'already-revoked' | 'not-found';

export interface TokenStore {
  create(token: NewToken): Promise<TokenRecord>;
  findByHash(hash: string): Promise<TokenRecord | undefined>;
  list(): Promise<TokenRecord[]>;
  revoke(id: number, at: Date): Promise<RevokeOutcome>;
  touch(id: number, at: Date): Promise<void>;
}

/** A rate-limit count of one subject (token id, client address) in one fixed window. */
export interface RateLimitCount {
  /** The policy's name: `token` or `failed-auth`. */
  policy: string;
  subject: string;
  /** Unix seconds. */
  windowStart: number;
  windowEnd: number;
  count: number;
}

/**
 * Rate-limit counts shared by every process on the database (see core/rate-limit.ts).
 * Written a batch at a time by a background loop, never on a request's path.
 */
export interface RateLimitStore {
  /** Adds each count to its shared total, all in one statement; answers the totals after. */
  add(counts: readonly RateLimitCount[]): Promise<RateLimitCount[]>;
  /** Deletes the counts of windows that ended before `before` (Unix seconds). */
  purge(before: number): Promise<void>;
}

export interface Store {
  readonly plants: PlantStore;
  readonly tokens: TokenStore;
  readonly audit: AuditStore;
  readonly idempotency: IdempotencyStore;
  readonly webhooks: WebhookStore;
  readonly webhookEvents: WebhookEvents;
  readonly webhookQueue: WebhookQueue;
  /** The changes feed's log of plant events (GET /events). */
  readonly events: EventLog;
  /**
   * Calls `listener` when another process on the database has written webhook messages
   * (PostgreSQL: LISTEN/NOTIFY); absent where no such signal exists (SQLite: the other
   * processes' messages are found by polling). Answers the function that stops it.
   */
  onRemoteMessages?(listener: () => void): () => void;
  /**
   * Where processes share their rate-limit counts; absent where each process counts on
   * its own (SQLite: see the README).
   */
  readonly rateLimits?: RateLimitStore;
  /**
   * Deletes up to `batch` records of ids taken that no create needs any more; answers how
   * many (fewer than `batch`: none is left). Absent where creates keep that record small
   * themselves (SQLite); on PostgreSQL, see the migration 0007_plant_id_pruning.
   */
  pruneTakenIds?(batch: number): Promise<number>;
  /** What opening the store did to the schema. */
  readonly migration: MigrationReport;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  /** The connection pool's state now, where there is one (PostgreSQL). */
  connections?(): PoolState;
  close(): Promise<void>;
}

export interface PoolState {
  /** Connections open, busy or idle. */
  open: number;
  idle: number;
  /** Statements waiting for a connection. */
  waiting: number;
  max: number;
}

export class PlantExistsError extends Error {
  constructor(readonly id: bigint) {
    super(`plant ${id} already exists`);
    this.name = 'PlantExistsError';
  }
}

/** A conditional write found the plant different from what the caller expected. */
export class PlantChangedError extends Error {
  constructor(readonly id: bigint) {
    super(`plant ${id} has changed`);
    this.name = 'PlantChangedError';
  }
}

/**
 * A create was to settle an Idempotency-Key its request no longer holds (freed, or taken
 * over after its lease ran out): nothing was created.
 */
export class KeyNotHeldError extends Error {
  constructor() {
    super('the Idempotency-Key is no longer held by this request');
    this.name = 'KeyNotHeldError';
  }
}

/** A webhook endpoint was not created: there are `max` already. */
export class WebhookEndpointLimitError extends Error {
  constructor(readonly max: number) {
    super(`there are ${max} webhook endpoints already, the most allowed`);
    this.name = 'WebhookEndpointLimitError';
  }
}

export class IdsExhaustedError extends Error {
  constructor() {
    super('no server-assigned plant id is left');
    this.name = 'IdsExhaustedError';
  }
}

export { StoreUnavailableError } from '../core/unavailable.js';
