import type { Socket } from 'node:net';

/**
 * Stopping and restarting the reading of an HTTP server's connection, the way Node's own
 * pipelining brake does it (lib/_http_server.js). That brake stops a connection only when
 * answers pile up unsent, which answers produced asynchronously never do: it would parse and
 * start every request a client pipelines. Setting `_paused` makes Node pause its parser after
 * the bytes at hand and keeps its own resume (onSocketResume) from reading again, except
 * where Node clears it itself: see `keepStopped`.
 */
interface HttpSocket extends Socket {
  _paused?: boolean;
  parser?: { resume(): void } | null;
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
 * Node resumes reading whenever it finds its own brake released (socketOnDrain: on a drain
 * of the socket, and whenever an answer queued behind another is written or sent on, with no
 * drain event), whoever stopped it. Every such resume emits 'resume' a tick later, after
 * Node's own listener: while `stopped()` holds, this stops the socket again there, before
 * anything is read. The parser is left as Node set it: paused alone, with the socket still
 * reading, it would meet the next bytes with an error (HPE_PAUSED, a 400).
 */
export function keepStopped(socket: HttpSocket, stopped: () => boolean): void {
  socket.on('resume', () => {
    if (stopped()) stopReading(socket);
  });
}
