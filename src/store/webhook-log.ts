// What both adapters share for the fan-out of webhook messages from the changes feed's log:
// which events an endpoint gets in one fan-out, and where its position moves (see the
// migrations *_webhook_log_positions.sql for why the messages come from the log).
import { randomBytes } from 'node:crypto';
import type { ChangeEvent } from '../core/change-events.js';
import type { WebhookEvent } from '../core/webhooks/events.js';
import { eventsFromText } from './webhook-rows.js';

/**
 * The pending messages an endpoint has at most before the fan-out stops giving it more: four
 * times the attempts it may have at once (fair-share.ts), so that an endpoint that answers
 * always has its next messages written; one that does not keeps this many and costs the
 * writes nothing more. Written into the statements and the partial index
 * webhook_endpoints_with_room: change it there too.
 */
export const MESSAGES_PER_ENDPOINT = 64;

/**
 * An endpoint that holds its most pending, none of them due within this (every one waiting
 * for a later try of the retry schedule, as when its receiver has been down for a while), is
 * stalled: the events behind would wait for those tries, up to the schedule's longest delay
 * (10 h by default), also once the receiver is back. So a stalled endpoint gets its next event
 * anyway, one message more than its most (a probe): the first delivered attempt makes the
 * others due at once (the queues' finish), and the endpoint resumes within minutes of its
 * receiver's return.
 */
export const STALLED_AFTER_MS = 5 * 60_000;

/** How often a fan-out looks for stalled endpoints at most (a look reads every full one). */
export const STALLED_LOOK_MS = 60_000;

/**
 * The probes an endpoint holds at most beyond MESSAGES_PER_ENDPOINT: past them, a stalled
 * endpoint waits for its messages' tries, so that a dead receiver's pending messages stay
 * bounded (each probe stays pending for the whole retry schedule).
 */
export const MAX_PROBES = 4;

/** What a stalled endpoint is read as: room for one message (see STALLED_AFTER_MS). */
export const STALLED_PENDING = MESSAGES_PER_ENDPOINT - 1;

/** How many events of the log a fan-out reads for a stalled endpoint: it takes one. */
export const STALLED_SCAN = 16;

/**
 * How many endpoints one fan-out takes at most: a tenth of its messages, so that a write
 * that each of many endpoints takes (one message each) is fanned out in few transactions,
 * while the messages written stay about `maxMessages` (planFanOut).
 */
export const endpointsPerFanOut = (maxMessages: number): number =>
  Math.max(1, Math.floor(maxMessages / 10));

/** The predicate of the partial index webhook_endpoints_with_room, word for word. */
export const WITH_ROOM = `enabled AND pending < ${MESSAGES_PER_ENDPOINT}`;

/**
 * An endpoint's position after an update that sets `enabled` (a bound value, true or 1 to
 * enable): an endpoint enabled again resumes where it stopped, but not below the horizon of
 * the changes feed (--events-retention), so that one disabled for months is not sent months
 * of changes. While enabled, its position is never moved for it: an endpoint that is slow
 * gets every event the audit trail keeps.
 */
export const RESUMED_POSITION = (enabled: string, greatest: 'max' | 'greatest'): string =>
  `CASE WHEN ${enabled} AND NOT enabled
     THEN ${greatest}(log_position, (SELECT position FROM event_horizon)) ELSE log_position END`;

/**
 * An endpoint whose messages end down to this many pending (from more) wakes the fan-out,
 * which then gives it up to MESSAGES_PER_ENDPOINT again: half of them in one transaction
 * (in several while 32 or more endpoints are behind, each getting its part of a fan-out),
 * not one message a transaction as each message ends. A delivery backlog in the log is sent
 * at 1,651 messages a second with refills of one, 353 µs of CPU each (bench/HISTORY.md). An
 * endpoint with fewer pending gets new events at each write anyway (it has room).
 */
export const REFILL_AT = MESSAGES_PER_ENDPOINT / 2;

/** How many events of the log one fan-out reads for one endpoint at most. */
export const SCAN_PER_ENDPOINT = 2 * MESSAGES_PER_ENDPOINT;

/** An enabled endpoint with room for messages, as the fan-out reads it. */
export interface LogEndpoint {
  id: bigint;
  /** The log position up to which it has had its events. */
  position: bigint;
  /** The event types it subscribes to, as stored (space-separated). */
  events: string;
  pending: number;
}

/** A message the fan-out writes. */
export interface LogMessage {
  endpointId: bigint;
  webhookId: string;
  type: WebhookEvent;
  payload: string;
  at: Date;
}

/** One endpoint's part of a fan-out: its messages, and its position moved `from` → `to`. */
export interface LogMove {
  id: bigint;
  from: bigint;
  to: bigint;
  messages: LogMessage[];
}

/**
 * A webhook id: `msg_`, the event's Unix milliseconds in 12 hex digits, then 80 random bits.
 * Unique as a random id is, and in time order, so that each new one goes at the end of the
 * UNIQUE index instead of onto a random page of it (random ids made every commit write a
 * page of that index per message, more of them the more messages are kept).
 */
export function webhookIdAt(at: Date): string {
  return `msg_${at.getTime().toString(16).padStart(12, '0')}${randomBytes(10).toString('hex')}`;
}

/**
 * How many messages one fan-out gives each endpoint read behind, given how many each would
 * take (`wants`: events of its types read, up to its room): `maxMessages` in all at most,
 * shared max-min fair. Each gets an equal part, and what one takes less of goes to the others
 * in equal parts (filled from the smallest want up, those that want alike in the order read;
 * capped parts differ by one at most). Given whole in the order read (furthest behind
 * first), 20 endpoints took a fan-out's 1,000 messages and a healthy endpoint read after
 * them, beside 20 hung ones (test/process/webhooks-fairness.test.ts), waited for the next
 * fan-out; in fixed equal parts, 99 endpoints whose types skipped what was read kept a busy
 * one to 10 messages a fan-out, not its 64. With more endpoints than messages, those that
 * want most (then those read last) get none this time.
 */
export function fairParts(wants: readonly number[], maxMessages: number): number[] {
  const parts = wants.map(() => 0);
  // Stable: endpoints that want alike keep the order read.
  const order = wants.map((_, i) => i).sort((a, b) => wants[a]! - wants[b]!);
  let left = maxMessages;
  for (const [k, i] of order.entries()) {
    const part = Math.min(wants[i]!, Math.ceil(left / (order.length - k)));
    parts[i] = part;
    left -= part;
  }
  return parts;
}

/** How many messages `planMove` would give the endpoint of `events` with no part set. */
export function messagesWanted(endpoint: LogEndpoint, events: readonly ChangeEvent[]): number {
  const wanted = new Set<string>(eventsFromText(endpoint.events));
  const count = events.reduce((n, event) => (wanted.has(event.type) ? n + 1 : n), 0);
  return Math.max(0, Math.min(MESSAGES_PER_ENDPOINT - endpoint.pending, count));
}

/** An endpoint read behind, with the events read for it (`asked` at most, oldest first). */
export interface ReadBehind {
  endpoint: LogEndpoint;
  events: readonly ChangeEvent[];
  asked: number;
}

/**
 * One fan-out's moves: each endpoint read behind its fair part of `maxMessages` (fairParts),
 * then stalled endpoints (a probe each) while fewer were planned, so that the messages
 * written stay about `maxMessages`. `stalled` is read lazily (SQLite reads each one's events
 * only if it is reached); one also behind (its messages ended between the two reads) once.
 */
export function planFanOut(
  behind: readonly ReadBehind[],
  stalled: Iterable<ReadBehind>,
  head: bigint,
  maxMessages: number,
): LogMove[] {
  const parts = fairParts(
    behind.map(({ endpoint, events }) => messagesWanted(endpoint, events)),
    maxMessages,
  );
  const moves = behind.flatMap(({ endpoint, events, asked }, i) => {
    const move = planMove(endpoint, events, head, asked, parts[i]);
    return move === undefined ? [] : [move];
  });
  const planned = new Set(moves.map((move) => move.id));
  let count = moves.reduce((n, move) => n + move.messages.length, 0);
  for (const { endpoint, events, asked } of stalled) {
    if (count >= maxMessages) break;
    if (planned.has(endpoint.id)) continue;
    const move = planMove(endpoint, events, head, asked);
    if (move === undefined) continue;
    moves.push(move);
    count += move.messages.length;
  }
  return moves;
}

/**
 * What the endpoint gets of `events` (those above its position, oldest first, as read: at
 * most `asked`, none above `head`): those of its types, up to its room and `most`, as
 * messages; and how far its position moves: to just before the first event it had no room
 * for, else over every event read, else (fewer read than asked: the log ends there) to
 * `head`, every position up to which is final. Undefined when it does not move.
 */
export function planMove(
  endpoint: LogEndpoint,
  events: readonly ChangeEvent[],
  head: bigint,
  asked: number = SCAN_PER_ENDPOINT,
  most = Infinity,
): LogMove | undefined {
  const wanted = new Set<string>(eventsFromText(endpoint.events));
  const room = Math.min(MESSAGES_PER_ENDPOINT - endpoint.pending, most);
  const messages: LogMessage[] = [];
  let to = events.length < asked ? head : events.at(-1)!.position;
  for (const [i, event] of events.entries()) {
    if (!wanted.has(event.type)) continue;
    if (messages.length >= room) {
      to = i === 0 ? endpoint.position : events[i - 1]!.position;
      break;
    }
    messages.push({
      endpointId: endpoint.id,
      webhookId: webhookIdAt(event.at),
      type: event.type,
      payload: event.data,
      at: event.at,
    });
  }
  return to > endpoint.position
    ? { id: endpoint.id, from: endpoint.position, to, messages }
    : undefined;
}
