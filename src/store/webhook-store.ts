// The webhook side of the store: endpoints and their deliveries, the events of plant writes
// and their fan-out into messages, and the queue of messages to send (see store.ts for the
// rest; it re-exports these).

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

/**
 * Webhook endpoints and the messages written for them. The messages themselves come from
 * the log of plant events (each write's audit entry, in the write's own transaction), fanned
 * out by WebhookEvents.
 */
export interface WebhookStore {
  /**
   * Throws WebhookEndpointLimitError, creating nothing, when `maxEndpoints` endpoints exist
   * already (counted so that creates at once, in any processes, never pass it together).
   */
  create(endpoint: NewWebhookEndpoint, maxEndpoints?: number): Promise<WebhookEndpoint>;
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

/** What one fan-out did. */
export interface FanOutStep {
  /**
   * Endpoints it found behind the log's head with room for messages: 0 when none had
   * anything to get. Those another process moved at the same time count too (more may wait).
   */
  endpoints: number;
  /** Messages it wrote. */
  messages: number;
  /**
   * Of the time it took, how long it waited for others rather than worked: on PostgreSQL for
   * the writes still committing below the watermark (between its looks at them, which count
   * as work), on SQLite for its turn at the writer. WebhookFanOut does not count it against
   * its share (counted, one wait of 200 ms behind a burst of creates paused the fan-out 2 s).
   */
  waitedMs?: number;
  /**
   * Whether an enabled endpoint has room for more messages: while none has, new events give
   * the fan-out nothing to do until a message ends or an endpoint changes.
   */
  room: boolean;
}

/** Why the fan-out may have work: a plant write's event, or room an endpoint may have got. */
export type FanOutWake = 'events' | 'room';

/**
 * The webhook messages of the changes feed's log (EventLog: a plant write's audit entry is its
 * event, and a write records nothing more for the webhooks, so that what it costs does not
 * grow with the endpoints). Each endpoint has a position in the log, from its creation on;
 * the fan-out gives it, as messages, the events above it of the types it subscribes to, while
 * it is enabled and has fewer than MESSAGES_PER_ENDPOINT messages pending (webhook-log.ts).
 */
export interface WebhookEvents {
  /**
   * Writes the messages of the endpoints furthest behind, about `maxMessages` at most, and
   * moves their positions, all in one transaction: a crash loses and doubles nothing. An
   * endpoint another process moved meanwhile is left to it (PostgreSQL: its position is no
   * longer the one read). Wakes the queue's listeners (onMessages) when it wrote a message.
   */
  fanOut(maxMessages: number): Promise<FanOutStep>;
  /**
   * Calls `listener` after each commit in this process that may give the fan-out work: a
   * plant write ('events'), the end of a message that takes its endpoint down to REFILL_AT
   * pending (webhook-log.ts) or a change of an endpoint ('room');
   * answers the function that stops it.
   */
  onEvents(listener: (why: FanOutWake) => void): () => void;
  /**
   * Whether other work uses the database now (PostgreSQL: see postgresWebhookEvents). Where the
   * store can tell, a fan-out's batch counts against its share of the time (WebhookFanOut)
   * only when other work did as it began or ended; where it cannot (SQLite, where a batch
   * holds the one writer), every batch counts.
   */
  othersBusy?(): boolean;
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

/** How many messages of each endpoint one claim may take. */
export interface ClaimShares {
  /** The most of any endpoint not in `endpoints`. */
  perEndpoint: number;
  /** The most of each endpoint named (0: none of it). */
  endpoints: ReadonlyMap<bigint, number>;
}

/**
 * Due webhook messages, each claimed with a lease so that no two processes (workers,
 * instances on one database) send the same attempt at once. A process killed mid-attempt
 * leaves its lease to run out; the message is then claimed again, same `webhookId`.
 */
export interface WebhookQueue {
  /**
   * Claims up to `limit` pending messages due at `now` whose lease is free or over,
   * setting their lease to `now + leaseMs`, at most `shares` of each endpoint (without
   * `shares`, up to `limit` of any). Skips messages of disabled endpoints. The endpoints take
   * turns: each one's earliest due message comes before any one's second, and so on (within
   * a turn, earliest due first), so that one endpoint's backlog never crowds out another's.
   */
  claim(now: Date, leaseMs: number, limit: number, shares?: ClaimShares): Promise<ClaimedMessage[]>;
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
  /**
   * Gives back a claim that was not attempted (no room for it, too little lease left, the
   * process stopping): the claim no longer counts as an attempt, so the message keeps its
   * place in the retry schedule, and its lease ends at `freeAt` (now, to let any process
   * take it at once; or `claimedUntil`, to keep others off it). Only while the lease is
   * still this claim's; answers whether it was.
   */
  release(messageId: bigint, claimedUntil: Date, freeAt: Date): Promise<boolean>;
  /**
   * When the earliest pending message of an enabled endpoint falls due after `after` (its
   * next attempt, or its lease's end), or null if none does; see earliestDue for when the
   * answer may be earlier or later. Messages due by `after` are left out: the claim made at
   * `after` took of them what the shares allowed.
   */
  nextDue(after: Date): Promise<Date | null>;
  /** Messages waiting to be delivered (pending), for the metrics' queue depth. */
  depth(): Promise<number>;
  /** Deletes delivered and failed messages (and their attempts) completed before `before`. */
  purge(before: Date): Promise<number>;
  /**
   * Disables the endpoints whose attempts have all failed since before `since` (none
   * succeeded since then, and the first failure is older); answers how many.
   */
  disableFailing(since: Date, now: Date): Promise<number>;
  /**
   * Calls `listener` after each commit in this process that wrote at least one message
   * (a fan-out of events, a retry asked for); answers the function that stops it.
   */
  onMessages(listener: () => void): () => void;
}
