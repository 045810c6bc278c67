import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { addressKey } from '../core/address-key.js';
import { SharedSlots } from '../core/shared-slots.js';

/**
 * Room for new connections at the limit on open ones, in two steps.
 * - The connections with no request unanswered are kept in the order they became idle (a
 *   Set keeps insertion order), and the one idle longest makes room for a newcomer, as nginx
 *   reuses its idle keep-alive connections when it runs out. Otherwise anyone could hold
 *   every connection by opening them and sending nothing more (or nothing at all) for the
 *   keep-alive or header timeout, and lock every other client out. A client whose idle
 *   connection is closed opens another, as after the keep-alive timeout.
 * - With none idle, the connections are shared among client addresses (an IPv6 /64 as one,
 *   see addressKey) as SharedSlots shares its slots: a newcomer from an address holding at
 *   least two fewer than the address holding the most closes that address's oldest, even
 *   with a request being answered. Otherwise one address could hold every connection busy
 *   (without a token: requests for large answers it never reads, each for the send
 *   timeout) and lock every other address out. A connection is never closed for one from
 *   its own address, nor from an address holding nearly as many.
 */
export class ConnectionRoom {
  private readonly idle = new Set<Socket>();
  private readonly slots: SharedSlots<string>;
  /** Gives back the slot of each connection admitted. */
  private readonly held = new Map<Socket, () => void>();
  /** Connections closed at the limit since the last report: to make room, or for want of it. */
  private reclaimed = 0;
  private takenOver = 0;
  private refused = 0;
  /** The server is closing: an idle connection is closed, not kept (see closeIdle). */
  private closing = false;

  /** `now`, a clock in milliseconds, paces how often an address takes another's place. */
  constructor(
    readonly max: number,
    now: () => number,
  ) {
    this.slots = new SharedSlots(max, now);
  }

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
    this.held.get(socket)?.();
    this.held.delete(socket);
  }

  /**
   * Whether a new connection may stay: at the limit, the one idle longest is closed for it,
   * or with none idle the oldest of the address holding the most, if it may take that one's
   * place (see the class). Closes the new one if not.
   */
  admit(socket: Socket): boolean {
    if (this.slots.inUse >= this.max) this.closeIdlest();
    const slot = this.slots.take(addressKey(socket.remoteAddress), () => {
      this.takenOver += 1;
      socket.destroy();
    });
    if (slot === undefined) {
      this.refused += 1;
      socket.destroy();
      return false;
    }
    this.held.set(socket, slot);
    return true;
  }

  private closeIdlest(): void {
    for (const candidate of this.idle) {
      this.idle.delete(candidate);
      // Its last answer still being sent: not idle for its client; the send timeout's.
      if (candidate.destroyed || candidate.writableLength > 0) continue;
      candidate.destroy();
      // Its place is free now, not at its 'close' a tick later, when the newcomer is in.
      this.closed(candidate);
      this.reclaimed += 1;
      return;
    }
  }

  /** Logs what was closed at the limit since the last report, in one line (a flood is one). */
  report(log: FastifyBaseLogger | undefined): void {
    if (this.reclaimed === 0 && this.takenOver === 0 && this.refused === 0) return;
    log?.warn(
      {
        maxConnections: this.max,
        idleClosed: this.reclaimed,
        closedForOtherAddresses: this.takenOver,
        refused: this.refused,
      },
      'connections at the limit: idle ones closed for new ones, else the oldest of the ' +
        'address holding the most for another address, else new ones refused',
    );
    this.reclaimed = 0;
    this.takenOver = 0;
    this.refused = 0;
  }
}
