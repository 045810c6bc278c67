import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { addressKey } from '../core/address-key.js';
import type { Metrics } from '../core/metrics.js';

/**
 * How many connections a newcomer at the limit looks at, of the idle ones and of the stalled
 * ones: a flood of new connections costs each a bounded look, however many are open.
 */
export const LOOK_AT = 32;

/**
 * Room for new connections at the limit on open ones. A newcomer closes, if it may, the
 * connection idle longest; else the one stalled longest; else it is closed itself.
 * - Idle: no request unanswered. They are kept in the order they became idle (a Set keeps
 *   insertion order), as nginx reuses its idle keep-alive connections when it runs out.
 *   Otherwise anyone could hold every connection by opening them and sending nothing more
 *   (or nothing at all) for the keep-alive or header timeout, and lock every other client
 *   out. A client whose idle connection is closed opens another, as after the keep-alive
 *   timeout.
 * - Stalled: an answer waiting unsent whose client has taken nothing of it for
 *   STALLED_FOR_ROOM_MS, as far as the guard's sweeps can tell (see `stalled`). Otherwise
 *   one client could hold every connection busy without a token (requests for large answers
 *   it never reads, each connection for the send timeout, then again) and lock every other
 *   client out. A request being worked on is never cut off.
 * - "If it may": the connections are shared among client addresses (an IPv6 /64 as one, see
 *   addressKey). A newcomer closes an idle connection of its own address or of an address
 *   holding more connections than its own, and a stalled one only of an address holding
 *   more. So an address opening connections over and over closes only its own, and cannot
 *   take an idle one from a client holding fewer.
 */
export class ConnectionRoom {
  private readonly idle = new Set<Socket>();
  /** The address (addressKey) of each connection admitted, and the count of each address. */
  private readonly addresses = new Map<Socket, string>();
  private readonly counts = new Map<string, number>();
  /** Connections closed at the limit since the last report: to make room, or for want of it. */
  private reclaimed = 0;
  private stallClosed = 0;
  private refused = 0;
  /** The server is closing: an idle connection is closed, not kept (see closeIdle). */
  private closing = false;

  /**
   * `stalled`: at most LOOK_AT of the connections whose answer waits unsent and whose client
   * has taken nothing of it for STALLED_FOR_ROOM_MS, stalled longest first (the guard's).
   */
  constructor(
    readonly max: number,
    private readonly stalled: () => Iterable<Socket> = () => [],
    private readonly metrics?: Pick<Metrics, 'connections' | 'closedAtLimit'>,
  ) {}

  /**
   * Node's own cap on connections, above the room's: a connection closed to make room is
   * counted by Node until its close completes, a moment after the new one arrives.
   */
  static nodeCap(max: number): number {
    return max + Math.ceil(max / 4) + 16;
  }

  /** `socket` has no request unanswered (it has just opened, or answered its last). */
  isIdle(socket: Socket): void {
    this.idle.delete(socket);
    if (socket.destroyed) return;
    if (this.closing && socket.writableLength === 0) socket.destroy();
    else this.idle.add(socket);
  }

  /**
   * The server is closing (Node's `server.close()` calls this as `closeIdleConnections`):
   * closes the connections idle now, and each one as it becomes idle. Node's own closes a
   * connection whose answer is ended (`res.end()` called) whether it was sent or not: a
   * client reading a large answer slowly lost its end (got 7 of 48 MB, in a test). Here an
   * answer still being sent is left to finish, or to the send timeout of a shutdown.
   */
  closeIdle(): void {
    this.closing = true;
    for (const socket of this.idle) {
      if (socket.writableLength > 0) continue;
      this.idle.delete(socket);
      socket.destroy();
    }
  }

  /** `socket` has a request being answered. */
  isBusy(socket: Socket): void {
    this.idle.delete(socket);
  }

  /** `socket` has closed: its place is free. */
  closed(socket: Socket): void {
    this.idle.delete(socket);
    const address = this.addresses.get(socket);
    if (address === undefined) return;
    this.addresses.delete(socket);
    this.metrics?.connections(this.addresses.size);
    const count = this.counts.get(address)! - 1;
    if (count === 0) this.counts.delete(address);
    else this.counts.set(address, count);
  }

  /**
   * Whether a new connection may stay: at the limit, the connection idle longest or the one
   * stalled longest is closed for it, if it may be (see the class). Closes the new one if not.
   */
  admit(socket: Socket): boolean {
    const address = addressKey(socket.remoteAddress);
    if (this.addresses.size >= this.max && !this.makeRoom(address)) {
      this.refused += 1;
      this.metrics?.closedAtLimit('refused');
      socket.destroy();
      return false;
    }
    this.addresses.set(socket, address);
    this.metrics?.connections(this.addresses.size);
    this.counts.set(address, (this.counts.get(address) ?? 0) + 1);
    return true;
  }

  private makeRoom(newcomer: string): boolean {
    const mine = this.counts.get(newcomer) ?? 0;
    const holdsMore = (socket: Socket) =>
      (this.counts.get(this.addresses.get(socket)!) ?? 0) > mine;
    let looked = 0;
    for (const candidate of this.idle) {
      if (++looked > LOOK_AT) break;
      // On its way out already: its place is free.
      if (candidate.destroyed) {
        this.closed(candidate);
        return true;
      }
      // Its last answer still being sent: not idle for its client; the send timeout's.
      if (candidate.writableLength > 0) {
        this.idle.delete(candidate);
        continue;
      }
      if (this.addresses.get(candidate) !== newcomer && !holdsMore(candidate)) continue;
      this.close(candidate);
      this.reclaimed += 1;
      this.metrics?.closedAtLimit('idle');
      return true;
    }
    for (const candidate of this.stalled()) {
      if (!this.addresses.has(candidate) || !holdsMore(candidate)) continue;
      this.close(candidate);
      this.stallClosed += 1;
      this.metrics?.closedAtLimit('stalled');
      return true;
    }
    return false;
  }

  private close(socket: Socket): void {
    socket.destroy();
    // Its place is free now, not at its 'close' a tick later, when the newcomer is in.
    this.closed(socket);
  }

  /** Logs what was closed at the limit since the last report, in one line (a flood is one). */
  report(log: FastifyBaseLogger | undefined): void {
    if (this.reclaimed === 0 && this.stallClosed === 0 && this.refused === 0) return;
    // The address holding the most: what an operator would look at (or block) first.
    let busiest: [string, number] | undefined;
    for (const entry of this.counts)
      if (busiest === undefined || entry[1] > busiest[1]) busiest = entry;
    log?.warn(
      {
        maxConnections: this.max,
        idleClosed: this.reclaimed,
        stalledClosed: this.stallClosed,
        refused: this.refused,
        busiestAddress: busiest?.[0] ?? null,
        itsConnections: busiest?.[1] ?? 0,
      },
      'connections at the limit: idle or stalled ones closed for new ones, new ones refused ' +
        'when none could be',
    );
    this.reclaimed = 0;
    this.stallClosed = 0;
    this.refused = 0;
  }
}
