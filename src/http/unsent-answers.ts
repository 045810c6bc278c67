import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Bytes of answers a connection may hold unsent (in Node's buffers, not yet taken by the
 * kernel) and still have another request handed on (ConnectionGuard): a client that
 * pipelines requests for large answers and reads none holds one answer and this, not one
 * per request in flight.
 */
export const UNSENT_PER_CONNECTION = 64 * 1024;

/**
 * Bytes of unsent answers all connections together may hold. Past it, the connections
 * whose client took nothing since the last sweep are closed, those holding most first, until
 * the rest is within it. The bound per connection alone is not enough: requests pipelined
 * in one burst are handed on before any answer exists, and 1,000 connections each holding
 * 8 answers of a 150 KB page held 715 MB (a token and its rate limit allow that).
 */
export const UNSENT_IN_ALL = 64 * 1024 * 1024;

/**
 * What the kernel has taken of what was written to `socket`, by whole writes: written minus
 * what still waits in Node's buffers. Node counts a write as waiting until all of it has gone,
 * so within one large write (an answer is one `res.end`) this does not move: see `queuedBytes`.
 */
const flushedBytes = (socket: Socket): number => socket.bytesWritten - socket.writableLength;

/**
 * What libuv still holds of the writes handed to it (its write queue): it shrinks as the
 * kernel takes part of a large write, which `flushedBytes` does not show.
 */
const queuedBytes = (socket: Socket): number =>
  (socket as { _handle?: { writeQueueSize?: number } | null })._handle?.writeQueueSize ?? 0;

/** A connection as the sweep of unsent answers sees it. */
export interface Sending {
  readonly socket: Socket;
  /** The answers of the requests being answered. */
  readonly answers: Set<ServerResponse>;
  /** Bytes the kernel had taken from the socket at the last sweep, and since when. */
  flushed: number;
  flushedSince: number;
  /** libuv's write queue at the last sweep: the kernel took some of it if it is smaller now. */
  queued: number;
  /**
   * Whether the socket held bytes unsent at the last sweep: an answer begun since has not
   * stalled, whatever the counts above say (one large write moves neither until it is done,
   * and libuv's queue was empty).
   */
  wasSending: boolean;
}

/**
 * How long an answer must have stalled (its client taking nothing of it, as far as the
 * process can see) for its connection to make room for another at the connection limit
 * (ConnectionRoom). The kernel tells progress in steps: libuv writes again only once the
 * kernel's send buffer has about a third free, so a client reading slowly can look stalled
 * for a while; this leaves it several sweeps, far below the send timeout.
 */
export const STALLED_FOR_ROOM_MS = 5_000;

/**
 * One sweep over `connections` at `now`: those whose answer has not moved for
 * `sendTimeoutMs` (the send timeout), those to close because all together hold more
 * than UNSENT_IN_ALL unsent (overBudget, among those whose answer did not move since the
 * last sweep), and those whose answer did not move since the last sweep, the longest
 * stalled first. Records each connection's progress for the next sweep.
 */
export function stalledAnswers<C extends Sending>(
  connections: Iterable<C>,
  now: number,
  sendTimeoutMs: number,
): { timedOut: C[]; overBound: C[]; stalled: C[] } {
  let total = 0;
  const timedOut: C[] = [];
  const stalled: { connection: C; unsent: number }[] = [];
  // Answers begun since the last sweep, nothing taken of them yet: past the bound, cut after
  // the stalled ones.
  const begun: { connection: C; unsent: number }[] = [];
  for (const connection of connections) {
    const socket = connection.socket;
    const flushed = flushedBytes(socket);
    const queued = queuedBytes(socket);
    const took = flushed !== connection.flushed || queued < connection.queued;
    const isNew = !connection.wasSending;
    connection.queued = queued;
    connection.wasSending = socket.writableLength > 0;
    if (socket.writableLength === 0 || took || isNew) {
      connection.flushed = flushed;
      connection.flushedSince = now;
      const unsent = unsentBytes(socket, connection.answers);
      total += unsent;
      if (socket.writableLength > 0 && !took) begun.push({ connection, unsent });
    } else if (now - connection.flushedSince >= sendTimeoutMs) {
      timedOut.push(connection);
    } else {
      const unsent = unsentBytes(socket, connection.answers);
      total += unsent;
      stalled.push({ connection, unsent });
    }
  }
  return {
    timedOut,
    overBound: overBudget(stalled, total, UNSENT_IN_ALL, begun),
    stalled: stalled.map((s) => s.connection).sort((a, b) => a.flushedSince - b.flushedSince),
  };
}

/**
 * The sockets of the first `lookAt` of `stalled` (a sweep's) whose clients still took nothing
 * of their answers, for ConnectionRoom: the sweep is up to a second old. Those closed since
 * (to make room, most of them) are dropped from the front of `stalled` first, so that more
 * than `lookAt` can make room between two sweeps.
 */
export function* stillStalled(stalled: Sending[], lookAt: number): Generator<Socket> {
  let gone = 0;
  while (gone < stalled.length && stalled[gone]!.socket.destroyed) gone += 1;
  stalled.splice(0, gone);
  for (const { socket, flushed, queued } of stalled.slice(0, lookAt)) {
    if (socket.destroyed || socket.writableLength === 0) continue;
    if (flushedBytes(socket) === flushed && queuedBytes(socket) >= queued) yield socket;
  }
}

/**
 * What `socket` holds unsent of its answers: the one being sent is in the socket's buffers;
 * those queued behind it (pipelined) have no socket yet and hold their own.
 */
export function unsentBytes(socket: Socket, answers: Iterable<ServerResponse>): number {
  let unsent = socket.writableLength;
  for (const answer of answers) if (answer.socket === null) unsent += answer.writableLength;
  return unsent;
}

/**
 * Which of `stalled` (connections whose client took nothing lately, with what each holds
 * unsent), then of `begun` (answers begun since the last look, nothing taken yet), to close
 * so that `total`, what every connection holds, is within `budget`: the largest first. None
 * while `total` is within it.
 */
export function overBudget<C>(
  stalled: { connection: C; unsent: number }[],
  total: number,
  budget = UNSENT_IN_ALL,
  begun: { connection: C; unsent: number }[] = [],
): C[] {
  const cut: C[] = [];
  if (total <= budget) return cut;
  const largestFirst = (list: typeof stalled) => [...list].sort((a, b) => b.unsent - a.unsent);
  for (const { connection, unsent } of [...largestFirst(stalled), ...largestFirst(begun)]) {
    if (total <= budget) break;
    cut.push(connection);
    total -= unsent;
  }
  return cut;
}

/** Closes `answer` as Node does (emitCloseNT, lib/_http_server.js) only for the one with the
 * socket: one queued behind it (a pipelined request's) would never hear its client has gone,
 * and would hold what it holds (an event stream's slot, a long poll's wait) for good. */
export function closeAnswer(answer: ServerResponse & { _closed?: boolean }): void {
  if (answer._closed === true) return;
  answer.destroyed = true;
  answer._closed = true;
  answer.emit('close');
}
