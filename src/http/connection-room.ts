import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';

/**
 * Room for new connections at the limit on open ones. The connections with no request
 * unanswered are kept in the order they became idle (a Set keeps insertion order), and the
 * one idle longest makes room for a newcomer, as nginx reuses its idle keep-alive
 * connections when it runs out. Otherwise anyone could hold every connection by opening
 * them and sending nothing more (or nothing at all) for the keep-alive or header timeout,
 * and lock every other client out. A client whose idle connection is closed opens another,
 * as after the keep-alive timeout; a request being answered is never cut off for another.
 */
export class ConnectionRoom {
  private readonly idle = new Set<Socket>();
  /** Connections closed at the limit since the last report: to make room, or for want of it. */
  private reclaimed = 0;
  private refused = 0;
  /** The server is closing: an idle connection is closed, not kept (see closeIdle). */
  private closing = false;

  constructor(readonly max: number) {}

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

  /** `socket` has a request being answered, or has closed. */
  isBusy(socket: Socket): void {
    this.idle.delete(socket);
  }

  /**
   * Whether a new connection may stay, `open` connections being open besides it: if at the
   * limit, the one idle longest is closed for it. Closes the new one if none is idle.
   */
  admit(socket: Socket, open: number): boolean {
    if (open < this.max) return true;
    for (const candidate of this.idle) {
      this.idle.delete(candidate);
      // Its last answer still being sent: not idle for its client; the send timeout's.
      if (candidate.destroyed || candidate.writableLength > 0) continue;
      candidate.destroy();
      this.reclaimed += 1;
      return true;
    }
    this.refused += 1;
    socket.destroy();
    return false;
  }

  /** Logs what was closed at the limit since the last report, in one line (a flood is one). */
  report(log: FastifyBaseLogger | undefined): void {
    if (this.reclaimed === 0 && this.refused === 0) return;
    log?.warn(
      { maxConnections: this.max, idleClosed: this.reclaimed, refused: this.refused },
      'connections at the limit: idle ones closed for new ones, new ones refused if none was idle',
    );
    this.reclaimed = 0;
    this.refused = 0;
  }
}
