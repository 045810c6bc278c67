import type { Socket } from 'node:net';

/**
 * Stopping and restarting the reading of an HTTP server's connection, the way Node's own
 * pipelining brake does it (lib/_http_server.js). That brake stops a connection only when
 * answers pile up unsent, which answers produced asynchronously never do: it would parse and
 * start every request a client pipelines. Setting `_paused` makes Node pause its parser after
 * the bytes at hand and keeps its own resume (onSocketResume) from reading again, with one
 * exception undone by `keepStoppedOnDrain`.
 */
interface HttpSocket extends Socket {
  _paused?: boolean;
  parser?: { pause(): void; resume(): void } | null;
}

export function stopReading(socket: HttpSocket): void {
  socket._paused = true;
  socket.pause();
}

export function resumeReading(socket: HttpSocket): void {
  socket._paused = false;
  socket.parser?.resume();
  socket.resume();
}

/**
 * Node resumes reading on every drain of the socket, whoever stopped it (socketOnDrain, a
 * listener added when the connection came, before this one): while `stopped()` holds, this
 * stops it again. Only `_paused` is set back: the resume Node scheduled for the next tick
 * sees it and pauses the socket itself, which a pause now would not prevent.
 */
export function keepStoppedOnDrain(socket: HttpSocket, stopped: () => boolean): void {
  socket.on('drain', () => {
    if (stopped() && socket._paused !== true) {
      socket._paused = true;
      socket.parser?.pause();
    }
  });
}
