import { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import type { ChangeEvent } from '../../core/change-events.js';
import { ApiError } from '../../core/errors.js';
import { eventFrame, HEARTBEAT, streamOpening } from '../../api/event-stream.js';
import type { EventFeed } from '../../service/event-feed.js';
import type { FeedCursor } from '../../service/recent-events.js';
import { TurnGate } from './turn-gate.js';

/** Events one read of the feed hands a stream at most. */
const STREAM_BATCH = 100;

/**
 * The batches of streams catching up (after a full batch) that one turn of the event loop
 * reads, all streams together: each reads up to STREAM_BATCH events (synchronously on
 * SQLite) and makes their text, about a millisecond.
 */
export const CATCH_UP_BATCHES_PER_TURN = 4;

/**
 * Streams following from memory that share a batch at one position go in the same turn, up
 * to this many besides the 4 (TurnGate's `sharedPerTurn`): each costs a slice of memory and
 * a write of a text made once, not a read of the log; a thousand would cost a turn the
 * writes of a thousand texts.
 */
export const FOLLOWERS_SHARING_PER_TURN = 64;
const catchingUp = new TurnGate<bigint>(CATCH_UP_BATCHES_PER_TURN, FOLLOWERS_SHARING_PER_TURN);

/**
 * The text of the batches sent last, made once for every stream that sends the same batch
 * (streams that are up to date are woken together and read the same events). A few batches,
 * as many as a turn lets through twice over, not a cache per event: a WeakMap of every event
 * in memory kept the events' text alive past their send and doubled the collector's share of
 * a create with one stream following.
 */
const lastBatches: { first: ChangeEvent; last: ChangeEvent; text: string }[] = [];
const BATCHES_KEPT = 2 * CATCH_UP_BATCHES_PER_TURN;

function textOf(events: ChangeEvent[]): string {
  const first = events[0]!;
  const last = events.at(-1)!;
  const kept = lastBatches.find((batch) => batch.first === first && batch.last === last);
  if (kept !== undefined) return kept.text;
  const text = events.length === 1 ? eventFrame(first) : events.map(eventFrame).join('');
  lastBatches.push({ first, last, text });
  if (lastBatches.length > BATCHES_KEPT) lastBatches.shift();
  return text;
}

/**
 * The body of an event stream: the events after `after`, then each new one as the feed hears
 * of it, a heartbeat whenever nothing happened for the feed's heartbeat time. A Readable of
 * bytes, pulled by the answer as the client takes them: a client that stops reading stops
 * the reads of the feed, holds what its buffers hold (a batch of at most 100 events here, one
 * more the answer took, and the socket's buffer), and is cut off by the connection's send
 * timeout (http/connections.ts). Ends when the feed closes (shutdown), and
 * when the events it would send next are no longer kept or cannot be read (logged): the
 * client resumes with Last-Event-ID, and learns why. `release` is called once it is over, or
 * as soon as `gone` aborts (the client's connection closed): a stream waiting for the next
 * event ends only when that wait does, and its slot must not be held until then.
 */
export function eventStream(
  feed: EventFeed,
  after: bigint,
  release: () => void,
  log: FastifyBaseLogger,
  gone: AbortSignal,
  allowed: () => Promise<boolean>,
): Readable {
  const stop = new AbortController();
  const stream = Readable.from(frames(feed, after, stop.signal, log, allowed), {
    objectMode: false,
    highWaterMark: 16 * 1024,
  });
  const end = () => {
    stop.abort();
    release();
  };
  // The client may have gone while the stream was being set up (its first read of the
  // feed): the listener would never run, and the slot would wait for the answer to fail.
  if (gone.aborted) end();
  else gone.addEventListener('abort', end, { once: true });
  stream.once('close', () => {
    gone.removeEventListener('abort', end);
    end();
  });
  return stream;
}

/**
 * The frames of a stream. Its token is checked again every `feed.tokenCheckMs`: a token
 * revoked or expired while the stream is open ends it (its client then gets 401), where a
 * leaked token would otherwise read every change for as long as its connection lasted.
 */
async function* frames(
  feed: EventFeed,
  after: bigint,
  signal: AbortSignal,
  log: FastifyBaseLogger,
  allowed: () => Promise<boolean>,
): AsyncGenerator<string> {
  yield streamOpening(after);
  const cursor = feed.follow(after);
  try {
    yield* following(feed, cursor, signal, log, allowed);
  } finally {
    cursor.close();
  }
}

async function* following(
  feed: EventFeed,
  cursor: FeedCursor,
  signal: AbortSignal,
  log: FastifyBaseLogger,
  allowed: () => Promise<boolean>,
): AsyncGenerator<string> {
  let position = cursor.position;
  let checked = performance.now();
  let sent = checked;
  const open = () => !signal.aborted && !feed.isClosed;
  // After a full batch the stream may be catching up: it reads (synchronously on SQLite) only
  // with room in a turn, with every other stream catching up. Its first read too, when it goes
  // to the log: hundreds of streams opened at once from an old position each read a batch in
  // the same turn, and held every other request. One that starts in memory (`after=now`, or
  // near the head) does not queue behind those catching up.
  let behind = !feed.inMemory(position);
  while (open()) {
    if (performance.now() - checked >= feed.tokenCheckMs) {
      checked = performance.now();
      if (!(await allowed())) {
        log.info('an event stream ends: its token was revoked or has expired');
        return;
      }
    }
    if (behind) {
      // From memory, the streams at the same position read the same batch and send one text:
      // they go together (TurnGate's key), a batch read from the log is each stream's own.
      await catchingUp.pass(signal, feed.inMemory(position) ? position : undefined);
      if (!open()) return;
    }
    let events;
    try {
      events = await feed.after(position, STREAM_BATCH);
    } catch (error) {
      if (!(error instanceof ApiError && error.errorName === 'eventsGone')) {
        log.warn({ err: error }, 'an event stream could not read the log; it ends');
      }
      return;
    }
    if (events.length > 0) {
      // Moved on before the text is taken: a client slow to take it holds none of the
      // feed's memory (its own batch only).
      position = cursor.position = events.at(-1)!.position;
      // A full batch: its next read may be at hand at once, and as long as the client's
      // socket takes the text the stream would read on without the event loop ever turning:
      // a few readers from an old position held every other request for seconds.
      behind = events.length === STREAM_BATCH;
      yield textOf(events);
      sent = performance.now();
      continue;
    }
    behind = false;
    const idle = performance.now() - sent;
    const wait = Math.min(feed.heartbeatMs - idle, feed.tokenCheckMs);
    if (!(await feed.waitBeyond(position, Math.max(wait, 0), signal)) && open()) {
      if (performance.now() - sent >= feed.heartbeatMs) {
        yield HEARTBEAT;
        sent = performance.now();
      }
    }
  }
}
