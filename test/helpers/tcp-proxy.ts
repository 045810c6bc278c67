import net from 'node:net';

/**
 * - `forward`: bytes flow both ways, as if the service talked to the database directly.
 * - `cut`: the database is gone: open connections are reset and new ones refused (or,
 *   with `{ refuse: false }`, accepted and reset at once).
 * - `blackhole`: a network partition: open connections stay open but nothing crosses
 *   them, and new connections are accepted but never reach the database. Only the
 *   client's own timeouts end the wait.
 */
export type ProxyMode = 'forward' | 'cut' | 'blackhole';

export interface CutOptions {
  /**
   * True (the default): stop listening, so a new connection is refused (ECONNREFUSED, one
   * round trip, the fastest clean failure). False: keep listening, accept and reset each
   * new connection at once (ECONNRESET), for a database host that is up but whose
   * database is not.
   */
  refuse?: boolean;
}

export interface TcpProxy {
  /** The port the proxy listens on (127.0.0.1); the same for the proxy's whole life. */
  readonly port: number;
  readonly mode: ProxyMode;
  /** Connections (client and database side as one) currently open through the proxy. */
  readonly connections: number;
  /** Client connections accepted so far, in every mode. */
  readonly accepted: number;
  /** Resets every open connection (both sides) and makes new ones fail. */
  cut(options?: CutOptions): Promise<void>;
  /**
   * Stops forwarding without closing anything. Bytes in flight are held (as TCP holds
   * unacknowledged segments), not dropped: `restore()` delivers them late, like a
   * partition that heals before TCP gives up.
   */
  blackhole(): void;
  /** Forwards again, on the same port; held connections resume. */
  restore(): Promise<void>;
  /** Resets every connection and stops listening for good. */
  close(): Promise<void>;
}

interface Link {
  client: net.Socket;
  /** Undefined while a connection accepted in blackhole mode waits for `restore()`. */
  upstream: net.Socket | undefined;
}

/** A TCP proxy on 127.0.0.1 (a free port) to `targetHost:targetPort`. */
export async function startProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let mode: ProxyMode = 'forward';
  let closed = false;
  let accepted = 0;
  const links = new Set<Link>();
  /** Every socket not yet closed, on both sides, so that a cut leaves none behind. */
  const sockets = new Set<net.Socket>();

  const track = (socket: net.Socket, link: Link, other: () => net.Socket | undefined) => {
    sockets.add(socket);
    // A failure on one side resets the other; a clean end is passed on by `pump`.
    socket.on('error', () => {
      const peer = other();
      if (peer !== undefined) reset(peer);
    });
    socket.on('close', () => {
      sockets.delete(socket);
      if (link.client.destroyed && (link.upstream?.destroyed ?? true)) links.delete(link);
    });
  };

  // Bytes from one side to the other, with backpressure, held while the mode is not
  // `forward` (a paused socket leaves what arrives in the kernel's buffers).
  const pump = (from: net.Socket, to: net.Socket) => {
    from.on('data', (chunk: Buffer) => {
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => {
          if (mode === 'forward') from.resume();
        });
      }
    });
    from.on('end', () => to.end());
  };

  const connectUpstream = (link: Link) => {
    const upstream = net.connect({ host: targetHost, port: targetPort, noDelay: true });
    link.upstream = upstream;
    track(upstream, link, () => link.client);
    // Writes made before the connection is up are queued by the socket itself.
    pump(link.client, upstream);
    pump(upstream, link.client);
  };

  const server = net.createServer({ noDelay: true }, (client) => {
    accepted += 1;
    if (mode === 'cut') {
      client.on('error', () => undefined);
      reset(client);
      return;
    }
    const link: Link = { client, upstream: undefined };
    links.add(link);
    track(client, link, () => link.upstream);
    if (mode === 'forward') connectUpstream(link);
    else client.pause();
  });
  // The proxy must never be the thing that crashes the test process.
  server.on('error', () => undefined);

  await listen(server, 0);
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  const { port } = address;

  const stopListening = () =>
    new Promise<void>((resolve) => {
      if (!server.listening) return resolve();
      // The callback waits for accepted sockets to close; they are reset just below.
      server.close(() => resolve());
    });

  const resetAll = () => {
    for (const socket of [...sockets]) reset(socket);
    links.clear();
  };

  return {
    port,
    get mode() {
      return mode;
    },
    get connections() {
      return links.size;
    },
    get accepted() {
      return accepted;
    },
    async cut({ refuse = true }: CutOptions = {}) {
      if (closed) throw new Error('proxy closed');
      mode = 'cut';
      const stopped = refuse ? stopListening() : Promise.resolve();
      resetAll();
      await stopped;
    },
    blackhole() {
      if (closed) throw new Error('proxy closed');
      if (mode === 'cut') throw new Error('restore() a cut proxy before blackholing it');
      mode = 'blackhole';
      for (const { client, upstream } of links) {
        client.pause();
        upstream?.pause();
      }
    },
    async restore() {
      if (closed) throw new Error('proxy closed');
      const previous = mode;
      if (!server.listening) await listenAgain(server, port);
      mode = 'forward';
      if (previous !== 'blackhole') return;
      for (const link of links) {
        if (link.upstream === undefined) connectUpstream(link);
        else link.upstream.resume();
        link.client.resume();
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      mode = 'cut';
      const stopped = stopListening();
      resetAll();
      await stopped;
    },
  };
}

/**
 * Closes a socket at once: with an RST when it can (the peer sees ECONNRESET at once), else
 * plainly. Not with an RST once `end()` was called: libuv refuses to reset a socket that is
 * shutting down, and Node then neither closes its handle nor emits 'close' (the process
 * later spins at exit waiting for it).
 */
function reset(socket: net.Socket): void {
  if (socket.destroyed) return;
  if (socket.connecting || socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}

function listen(server: net.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/**
 * Listens on the port the proxy had. Node binds with SO_REUSEADDR, so connections the cut
 * left in TIME_WAIT do not block it; should another socket have taken the port meanwhile
 * (an outgoing connection given it as its ephemeral port), a few retries wait it out.
 */
async function listenAgain(server: net.Server, port: number): Promise<void> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await listen(server, port);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 20) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
