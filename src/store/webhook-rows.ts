import type { Log } from '../core/log.js';
import {
  DISABLED_REASONS,
  type Delivery,
  type DeliveryAttempt,
  type DisabledReason,
  type WebhookEndpoint,
} from '../core/webhooks/endpoint.js';
import { type DeliveryStatus, isWebhookEvent, type WebhookEvent } from '../core/webhooks/events.js';
import type { ClaimedMessage } from './store.js';

// What both adapters share for webhooks: row mapping (SQLite keeps times as Unix
// milliseconds, PostgreSQL as timestamptz, which its event reads select as milliseconds too;
// each adapter passes its reader of a time), and the in-process signal that wakes the
// dispatcher after a commit.

/** A stored time as a Date: an adapter's reader of its own time columns. */
export type TimeReader = (value: unknown) => Date;

/** A time stored or read as epoch milliseconds (SQLite's columns, PostgreSQL's event reads). */
export const epochMillis: TimeReader = (value) => new Date(Number(value));

/** Events as stored (space-separated). Unknown ones (from a newer version) are dropped. */
export const eventsFromText = (text: string): WebhookEvent[] =>
  text.split(' ').filter(isWebhookEvent);

export const eventsToText = (events: readonly WebhookEvent[]): string => events.join(' ');

export const ENDPOINT_COLUMNS =
  'id, url, events, description, enabled, disabled_reason, created_at, updated_at';

export interface EndpointRow {
  id: bigint;
  url: string;
  events: string;
  description: string | null;
  enabled: boolean | bigint | number;
  disabled_reason: string | null;
  created_at: unknown;
  updated_at: unknown;
}

const isDisabledReason = (text: string | null): text is DisabledReason =>
  (DISABLED_REASONS as readonly (string | null)[]).includes(text);

/**
 * The `disabled_reason` an endpoint update sets, `enabled` the new value if the update sets
 * one (SQL on `enabled` and `disabled_reason`, the columns before the update): a PATCH that
 * disables an enabled endpoint is the reason; one that disables it again keeps the first.
 */
export const DISABLED_REASON_AFTER_UPDATE = (enabled: string) =>
  `CASE WHEN ${enabled} IS NULL THEN disabled_reason
     WHEN ${enabled} THEN NULL
     WHEN enabled THEN 'request'
     ELSE disabled_reason END`;

export function toEndpoint(row: EndpointRow, time: TimeReader): WebhookEndpoint {
  return {
    id: row.id,
    url: row.url,
    events: eventsFromText(row.events),
    ...(row.description !== null && { description: row.description }),
    enabled: Boolean(row.enabled),
    ...(!row.enabled &&
      isDisabledReason(row.disabled_reason) && {
        disabledReason: row.disabled_reason,
      }),
    createdAt: time(row.created_at),
    updatedAt: time(row.updated_at),
  };
}

export const MESSAGE_COLUMNS =
  'id, webhook_id, event_type, payload, status, created_at, next_attempt_at';

export interface MessageRow {
  id: bigint;
  webhook_id: string;
  event_type: WebhookEvent;
  payload: string;
  status: DeliveryStatus;
  created_at: unknown;
  next_attempt_at: unknown;
}

export const ATTEMPT_COLUMNS = 'message_id, at, duration_ms, http_status, error, response_excerpt';

export interface AttemptRow {
  message_id: bigint;
  at: unknown;
  duration_ms: bigint | number;
  http_status: bigint | number | null;
  error: string | null;
  response_excerpt: string;
}

/** Messages with their attempts, in the order of `messages`. */
export function toDeliveries(
  messages: MessageRow[],
  attempts: AttemptRow[],
  time: TimeReader,
): Delivery[] {
  const byMessage = new Map<bigint, DeliveryAttempt[]>();
  for (const row of attempts) {
    const list = byMessage.get(row.message_id) ?? [];
    list.push({
      at: time(row.at),
      durationMs: Number(row.duration_ms),
      httpStatus: row.http_status === null ? null : Number(row.http_status),
      error: row.error,
      responseExcerpt: row.response_excerpt,
    });
    byMessage.set(row.message_id, list);
  }
  return messages.map((row) => ({
    id: row.id,
    webhookId: row.webhook_id,
    eventType: row.event_type,
    payload: row.payload,
    status: row.status,
    createdAt: time(row.created_at),
    ...(row.status === 'pending' && { nextAttemptAt: time(row.next_attempt_at) }),
    attempts: byMessage.get(row.id) ?? [],
  }));
}

/** What a claim reads of a message and its endpoint. */
export interface ClaimRow {
  id: bigint;
  webhook_id: string;
  event_type: WebhookEvent;
  payload: string;
  created_at: unknown;
  attempts: bigint | number;
  endpoint_id: bigint;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_until: unknown;
}

export function toClaimed(row: ClaimRow, now: Date, until: Date, time: TimeReader): ClaimedMessage {
  const previous =
    row.previous_secret !== null &&
    row.previous_until !== null &&
    time(row.previous_until).getTime() > now.getTime()
      ? [row.previous_secret]
      : [];
  return {
    id: row.id,
    webhookId: row.webhook_id,
    eventType: row.event_type,
    payload: row.payload,
    createdAt: time(row.created_at),
    attempt: Number(row.attempts),
    claimedUntil: until,
    endpoint: { id: row.endpoint_id, url: row.url, secrets: [row.secret, ...previous] },
  };
}

/** Columns of a message after a finished attempt, by the next step. */
export function finishedStatus(kind: 'delivered' | 'retry' | 'failed' | 'gone'): DeliveryStatus {
  if (kind === 'delivered') return 'delivered';
  if (kind === 'failed') return 'failed';
  return 'pending';
}

/**
 * An in-process wake-up: the dispatcher's, fired after a commit that wrote a message; the
 * changes feed's, fired after a commit that changed plants, with what the commit knows of
 * its events (`T`).
 */
export class MessageSignal<T = void> {
  private readonly listeners = new Set<(value: T) => void>();

  constructor(private readonly log: Log) {}

  on(listener: (value: T) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  fire(value: T): void {
    for (const listener of this.listeners) {
      // A listener that throws is its own bug: it must not turn a committed write into a
      // failed answer.
      try {
        listener(value);
      } catch (error) {
        this.log.error({ err: error }, 'a wake-up listener failed after a commit');
      }
    }
  }
}

/**
 * Text from a receiver, as a text column can hold it: PostgreSQL text cannot hold U+0000,
 * so it becomes U+FFFD (on both databases, so that both keep the same).
 */
export const storableText = (text: string): string => text.replaceAll('\u0000', '\uFFFD');

/**
 * How many pending messages, earliest first, a look for the next due time reads at most: a
 * backlog (an endpoint down for hours) never makes that look read all of it.
 */
export const NEXT_DUE_WINDOW = 1000;

/** Messages past their retention one statement deletes at most. */
export const PURGE_BATCH = 1000;

/**
 * The next due time after a claim, from the window of the earliest pending messages: the
 * earliest due time after the claim of an enabled endpoint's message in it (`due`), or, when
 * the window is full, the earliest next attempt after the claim of any pending message
 * (`beyond`, one probe of webhook_messages_due) if that is earlier, since a message past the
 * window may be due then. A full window of messages due by the claim is a backlog its
 * endpoints' shares hold back; looking past it finds another endpoint's retry on time.
 * It may name a message the claim then cannot take (its endpoint's share is full, its
 * endpoint disabled, or it is leased): the dispatcher then wakes for nothing and looks again,
 * no sooner than a quarter of a second later. Later than the true time only for a lease
 * ending on a message behind the window, which waits for the poll.
 */
export function earliestDue(due: Date | null, n: number, beyond: Date | null): Date | null {
  if (n < NEXT_DUE_WINDOW || beyond === null) return due;
  return due === null || beyond < due ? beyond : due;
}
