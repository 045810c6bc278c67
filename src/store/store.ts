import type { AuditEntry, AuditQuery, WriteOrigin } from '../core/audit.js';
import type {
  ClaimedKey,
  ClaimOutcome,
  IdempotencyClaim,
  KeptRefusal,
} from '../core/idempotency.js';
import type { NewPlant, Plant, PlantChange, PlantQuery } from '../core/plant.js';
import type { Scope } from '../core/scopes.js';
import type { TokenRecord } from '../core/tokens.js';
import type {
  Delivery,
  DeliveryAttempt,
  DeliveryQuery,
  NewWebhookEndpoint,
  WebhookEndpoint,
  WebhookEndpointChange,
  WebhookEndpointQuery,
} from '../core/webhooks/endpoint.js';
import type { WebhookEvent } from '../core/webhooks/events.js';
import type { MigrationReport } from './migrations.js';

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

export interface ConditionalWriteOptions extends WriteOptions {
  /**
   * Write only if the plant is still exactly this, else PlantChangedError (same check,
   * same transaction: a compare-and-set).
   */
  expected?: Plant;
}

/**
 * The persistence contract every database adapter implements (see
 * test/store-contract.ts, which runs the same suite against each adapter).
 * Adapters throw the errors below for expected outcomes, never database errors.
 * Every write that changes a plant adds its audit entry in the same transaction.
 */
export interface PlantStore {
  /**
   * Throws PlantExistsError if the id is taken, IdsExhaustedError if none is left, and
   * KeyNotHeldError, creating nothing, if `idempotencyKey` is no longer claimed.
   */
  insert(plant: NewPlant, options?: InsertOptions): Promise<Plant>;
  get(id: bigint): Promise<Plant | undefined>;
  list(query: PlantQuery): Promise<Plant[]>;
  /** Applies the change atomically; undefined when no plant has the id. */
  update(
    id: bigint,
    change: PlantChange,
    options?: ConditionalWriteOptions,
  ): Promise<Plant | undefined>;
  /** True when a plant was deleted, false when none had the id. */
  delete(id: bigint, options?: ConditionalWriteOptions): Promise<boolean>;
}

/** The trail of plant writes (see core/audit.ts); written by PlantStore, read here. */
export interface AuditStore {
  list(query: AuditQuery): Promise<AuditEntry[]>;
}

/**
 * Idempotency-Key records of creates. A key is claimed before the create runs; the
 * create settles it with its plant (PlantStore.insert), a refusal with `settle`, and a
 * failure without a definite answer frees it with `release`.
 */
export interface IdempotencyStore {
  claim(claim: IdempotencyClaim): Promise<ClaimOutcome>;
  settle(key: ClaimedKey, refusal: KeptRefusal): Promise<void>;
  release(key: ClaimedKey): Promise<void>;
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

/**
 * Webhook endpoints and the messages written for them. The messages themselves are written
 * by PlantStore, in the transaction of the change they tell of (the outbox), for every
 * enabled endpoint subscribed to the change's event at that moment.
 */
export interface WebhookStore {
  create(endpoint: NewWebhookEndpoint): Promise<WebhookEndpoint>;
  get(id: bigint): Promise<WebhookEndpoint | undefined>;
  list(query: WebhookEndpointQuery): Promise<WebhookEndpoint[]>;
  /** Applies the change atomically; undefined when no endpoint has the id. */
  update(id: bigint, change: WebhookEndpointChange, at: Date): Promise<WebhookEndpoint | undefined>;
  /** Deletes the endpoint with its messages; false when none had the id. */
  delete(id: bigint): Promise<boolean>;
  /**
   * Makes `secret` the one that signs, the current one signing beside it until
   * `previousUntil`; undefined when no endpoint has the id.
   */
  rotateSecret(
    id: bigint,
    secret: string,
    at: Date,
    previousUntil: Date,
  ): Promise<WebhookEndpoint | undefined>;
  /** A page of the endpoint's messages with their attempts, newest first. */
  deliveries(query: DeliveryQuery): Promise<Delivery[]>;
  /**
   * Makes the message pending with its next attempt due at `at` (a failed one too);
   * false when the endpoint has no message with this id.
   */
  retry(endpointId: bigint, messageId: bigint, at: Date): Promise<boolean>;
}

/** A message claimed for one attempt, with what is needed to send it. */
export interface ClaimedMessage {
  id: bigint;
  /** `msg_...`: the `webhook-id` header, the same on every attempt. */
  webhookId: string;
  eventType: WebhookEvent;
  /** The exact JSON body, ids as exact integers. */
  payload: string;
  createdAt: Date;
  /** The 1-based number of this attempt. */
  attempt: number;
  /** The end of this claim's lease; `finish` records only while it is still ours. */
  claimedUntil: Date;
  endpoint: {
    id: bigint;
    url: string;
    /** `whsec_...`: the current secret first, then the previous one while its overlap lasts. */
    secrets: string[];
  };
}

/** One attempt at sending a message, as the attempt log shows it. */
export type AttemptRecord = DeliveryAttempt;

/** What becomes of a message after an attempt. */
export type NextStep =
  | { kind: 'delivered' }
  | { kind: 'retry'; at: Date }
  | { kind: 'failed' }
  /** 410 Gone: the endpoint is disabled; its pending messages are kept. */
  | { kind: 'gone' };

/**
 * Due webhook messages, each claimed with a lease so that no two processes (workers,
 * instances on one database) send the same attempt at once. A process killed mid-attempt
 * leaves its lease to run out; the message is then claimed again, same `webhookId`.
 */
export interface WebhookQueue {
  /**
   * Claims up to `limit` pending messages due at `now` whose lease is free or over,
   * setting their lease to `now + leaseMs`. Skips messages of disabled endpoints.
   */
  claim(now: Date, leaseMs: number, limit: number): Promise<ClaimedMessage[]>;
  /**
   * Records one attempt and its consequence, only while the lease `claimedUntil` is still
   * this claim's; answers false (recording nothing) when it is not.
   */
  finish(
    messageId: bigint,
    claimedUntil: Date,
    attempt: AttemptRecord,
    next: NextStep,
  ): Promise<boolean>;
  /** When the earliest pending message of an enabled endpoint is due, or null if none is. */
  nextDue(): Promise<Date | null>;
  /** Deletes delivered and failed messages (and their attempts) completed before `before`. */
  purge(before: Date): Promise<number>;
  /**
   * Disables the endpoints whose attempts have all failed since before `since` (none
   * succeeded since then, and the first failure is older); answers how many.
   */
  disableFailing(since: Date, now: Date): Promise<number>;
  /**
   * Calls `listener` after each commit in this process that wrote at least one message
   * (a plant change, a retry asked for); answers the function that stops it.
   */
  onMessages(listener: () => void): () => void;
}

export interface Store {
  readonly plants: PlantStore;
  readonly tokens: TokenStore;
  readonly audit: AuditStore;
  readonly idempotency: IdempotencyStore;
  readonly webhooks: WebhookStore;
  readonly webhookQueue: WebhookQueue;
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
  /** What opening the store did to the schema. */
  readonly migration: MigrationReport;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  close(): Promise<void>;
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

/** Whether two plants are the same representation. */
export const samePlant = (a: Plant, b: Plant): boolean =>
  a.id === b.id && a.name === b.name && a.tag === b.tag;

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

export class IdsExhaustedError extends Error {
  constructor() {
    super('no server-assigned plant id is left');
    this.name = 'IdsExhaustedError';
  }
}

export { StoreUnavailableError } from '../core/unavailable.js';
