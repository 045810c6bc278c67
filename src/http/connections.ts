import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { Metrics } from '../core/metrics.js';
import { ConnectionRoom, LOOK_AT } from './connection-room.js';
import { keepStopped, resumeReading, stopReading } from './socket-reading.js';
import {
  closeAnswer,
  type Sending,
  STALLED_FOR_ROOM_MS,
  stalledAnswers,
  stillStalled,
  UNSENT_PER_CONNECTION,
  unsentBytes,
} from './unsent-answers.js';

/** What one connection may cost, whatever its client sends or fails to read. */
export interface ConnectionLimits {
  /** Requests of one connection being answered at once; reading stops at this many. */
  inFlight: number;
  /**
   * Requests a client may have sent ahead of its answers (those being answered included);
   * a connection with more is closed at once, without answering the rest.
   */
  pipelined: number;
  /** An answer the client takes nothing of for this long closes the connection. */
  sendTimeoutMs: number;
  /** Open connections at most; at the limit, see ConnectionRoom. */
  maxConnections?: number;
}

interface Connection extends Sending {
  readonly socket: Socket;
  /** Requests handed to the app and not yet answered. */
  inFlight: number;
  /** Requests parsed while no more could be handed on, waiting their turn, oldest first. */
  readonly waiting: [IncomingMessage, ServerResponse][];
  /** Reading stopped by the guard (see socket-reading.ts); `mustWait` says why. */
  pausedHere: boolean;
  /** Waiting for the socket to drain before handing on more (see `mayHandOn`). */
  drainAwaited: boolean;
}

/** How often stalled answers are looked for (a send timeout holds to about this), and how
 * many looks a send timeout has once the server is closing (see `closing`). */
const SWEEP_MS = 1_000;
const CLOSING_LOOKS = 2;

// The guard of each server one made: shutdown asks it what is still unanswered.
const guards = new WeakMap<Server, ConnectionGuard>();

/**
 * Requests the connections of `server` (made by a ConnectionGuard) have sent and not been
 * answered yet, those waiting their turn included; a connection that sent nothing counts none.
 */
export function unansweredRequests(server: Server): number {
  return guards.get(server)?.unanswered() ?? 0;
}

/**
 * An HTTP server whose connections are bounded in memory and in time: at most
 * `inFlight` requests of one connection are handed to `handler` at once (fewer while its
 * answers wait unsent, see unsent-answers.ts), and the socket is not read while any wait;
 * a client that pipelines more than `pipelined` requests ahead of its answers, or takes
 * nothing of an answer for `sendTimeoutMs`, is disconnected. The request, header and
 * keep-alive timeouts bound the other direction; ConnectionRoom the number of connections.
 */
export class ConnectionGuard {
  private readonly connections = new Map<Socket, Connection>();
  private readonly room: ConnectionRoom;
  private log: FastifyBaseLogger | undefined;
  private server: Server | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private sendTimeoutMs: number;
  /** Those whose client took nothing for STALLED_FOR_ROOM_MS at the last sweep, longest first. */
  private stalled: Connection[] = [];

  constructor(
    private readonly limits: ConnectionLimits,
    private readonly now: () => number = Date.now,
    metrics?: Pick<Metrics, 'connections' | 'closedAtLimit'>,
  ) {
    this.sendTimeoutMs = limits.sendTimeoutMs;
    const stalled = () => stillStalled(this.stalled, LOOK_AT);
    this.room = new ConnectionRoom(limits.maxConnections ?? Infinity, stalled, metrics);
  }

  /** For Fastify's `serverFactory`: the server, with `handler` behind the guard. */
  createServer(
    handler: RequestListener,
    { keepAliveTimeout, ...options }: ServerOptions & { keepAliveTimeout: number },
  ): Server {
    const server = createServer(options, (request, response) =>
      this.admit(request, response, handler),
    );
    server.keepAliveTimeout = keepAliveTimeout;
    if (this.limits.maxConnections !== undefined) {
      server.maxConnections = ConnectionRoom.nodeCap(this.limits.maxConnections);
    }
    server.closeIdleConnections = () => this.room.closeIdle();
    guards.set(server, this);
    this.server = server;
    server.on('connection', (socket: Socket) => this.track(socket));
    server.on('listening', () => this.sweepEvery(SWEEP_MS));
    server.on('close', () => clearInterval(this.sweeper));
    return server;
  }

  /**
   * The server is shutting down: from now on an answer of which the client takes nothing
   * for `sendTimeoutMs` (SHUTDOWN_SEND_TIMEOUT_MS, or the configured timeout if shorter)
   * closes its connection. Without this, a client that stopped reading (an event stream
   * ended by the shutdown, a large answer) would hold the shutdown for its whole grace.
   */
  closing(sendTimeoutMs: number): void {
    this.sendTimeoutMs = Math.min(this.sendTimeoutMs, sendTimeoutMs);
    if (this.server?.listening === true) {
      this.sweepEvery(this.sendTimeoutMs / CLOSING_LOOKS);
      setImmediate(() => this.sweep());
    }
  }

  private sweepEvery(ms: number): void {
    clearInterval(this.sweeper);
    // Each sweep after the turn's I/O (setImmediate): a process that was not scheduled for a
    // while first writes what its sockets have room for, then judges them.
    this.sweeper = setInterval(() => setImmediate(() => this.sweep()), ms).unref();
  }

  unanswered(): number {
    let requests = 0;
    for (const { inFlight, waiting } of this.connections.values())
      requests += inFlight + waiting.length;
    return requests;
  }

  /** Where disconnections are logged (the app's logger exists only after the server). */
  useLog(log: FastifyBaseLogger): void {
    this.log = log;
  }

  private track(socket: Socket): void {
    if (!this.room.admit(socket)) return;
    const connection: Connection = {
      socket,
      inFlight: 0,
      answers: new Set(),
      waiting: [],
      pausedHere: false,
      drainAwaited: false,
      flushed: 0,
      flushedSince: this.now(),
      queued: 0,
      wasSending: false,
    };
    this.connections.set(socket, connection);
    this.room.isIdle(socket);
    keepStopped(socket, () => {
      // Left stopped only for Node's brake (see `next`), which Node has just released.
      connection.pausedHere = connection.pausedHere && this.mustWait(connection);
      return connection.pausedHere;
    });
    socket.once('close', () => {
      this.connections.delete(socket);
      this.room.closed(socket);
      for (const answer of connection.answers) closeAnswer(answer);
    });
  }

  private admit(request: IncomingMessage, response: ServerResponse, handler: RequestListener) {
    const connection = this.connections.get(request.socket);
    if (connection === undefined) return handler(request, response);
    if (connection.socket.destroyed) return;
    if (connection.waiting.length === 0 && this.mayHandOn(connection, handler)) {
      this.dispatch(connection, request, response, handler);
    } else if (connection.inFlight + connection.waiting.length < this.limits.pipelined) {
      connection.waiting.push([request, response]);
    } else {
      // Parsed requests cost memory until answered, and this client is not reading its
      // answers fast enough to justify more: what it sent beyond is not served.
      this.disconnect(connection, 'too many pipelined requests');
      return;
    }
    if (this.mustWait(connection) && !connection.pausedHere) {
      connection.pausedHere = true;
      stopReading(connection.socket);
    }
  }

  private dispatch(
    connection: Connection,
    request: IncomingMessage,
    response: ServerResponse,
    handler: RequestListener,
  ): void {
    connection.inFlight += 1;
    connection.answers.add(response);
    this.room.isBusy(connection.socket);
    let done = false;
    const answered = () => {
      if (done) return;
      done = true;
      connection.inFlight -= 1;
      connection.answers.delete(response);
      this.next(connection, handler);
      if (connection.inFlight === 0 && connection.waiting.length === 0) {
        this.room.isIdle(connection.socket);
      }
    };
    // 'close' follows 'finish' (a tick later) once the answer is handed to the kernel, and
    // comes alone, possibly twice, if the connection is cut first: one listener, not two
    // `once` wrappers, on every answer.
    response.on('close', answered);
    handler(request, response);
  }

  private next(connection: Connection, handler: RequestListener): void {
    const socket = connection.socket;
    if (socket.destroyed) return;
    while (connection.waiting.length > 0 && this.mayHandOn(connection, handler)) {
      const [request, response] = connection.waiting.shift()!;
      this.dispatch(connection, request, response, handler);
    }
    // While the socket needs a drain, Node's own brake may hold it too: its drain resumes.
    if (connection.pausedHere && !this.mustWait(connection) && !socket.writableNeedDrain) {
      connection.pausedHere = false;
      resumeReading(socket);
    }
  }

  /** Whether the guard keeps the connection unread: no more of its requests may start. */
  private mustWait(connection: Connection): boolean {
    return connection.inFlight >= this.limits.inFlight || connection.waiting.length > 0;
  }

  /**
   * Whether another request of `connection` may be handed on: fewer than `inFlight` being
   * answered, and fewer than UNSENT_PER_CONNECTION bytes of its answers unsent. If only the
   * bytes stand in the way, the next drain of the socket looks again (an answer handed to
   * the socket looks again when it is done).
   */
  private mayHandOn(connection: Connection, handler: RequestListener): boolean {
    if (connection.inFlight >= this.limits.inFlight) return false;
    const socket = connection.socket;
    if (unsentBytes(socket, connection.answers) < UNSENT_PER_CONNECTION) return true;
    if (!connection.drainAwaited) {
      connection.drainAwaited = true;
      socket.once('drain', () => {
        connection.drainAwaited = false;
        this.next(connection, handler);
      });
    }
    return false;
  }

  /** Closes connections whose pending answer has not moved for the send timeout. */
  private sweep(): void {
    this.room.report(this.log);
    const now = this.now();
    const { timedOut, overBound, stalled } = stalledAnswers(
      this.connections.values(),
      now,
      this.sendTimeoutMs,
    );
    this.stalled = stalled.filter((c) => now - c.flushedSince >= STALLED_FOR_ROOM_MS);
    for (const connection of timedOut) {
      this.disconnect(connection, 'answer not read within the send timeout');
    }
    if (overBound.length > 0) {
      // One line for all: a flood of such connections would be a flood of lines.
      this.log?.warn(
        { connections: overBound.length },
        'connections closed: their clients read nothing, and the answers they held took ' +
          'what all connections hold unsent past its bound',
      );
      for (const connection of overBound) {
        connection.waiting.length = 0;
        connection.socket.destroy();
      }
    }
  }

  private disconnect(connection: Connection, reason: string): void {
    const socket = connection.socket;
    this.log?.warn(
      { client: socket.remoteAddress ?? null, unanswered: connection.inFlight, reason },
      'connection closed',
    );
    connection.waiting.length = 0;
    socket.destroy();
  }
}
