/**
 * The rows of creates with webhook endpoints subscribed (0, 1 and 1,000): what a write costs
 * with them, not what delivering costs. The endpoints are plantstore's own (created by its
 * store code before the server starts), all subscribed to `plant.created`, all at one address
 * in this harness that takes connections and never answers: each attempt waits out its
 * timeout, so the dispatcher holds one attempt open for each endpoint (1,000 connections to
 * one host) and does next to nothing else, while the
 * fan-out gives each endpoint the turn's creates until it holds its most pending
 * (MESSAGES_PER_ENDPOINT), as on a store whose receivers stopped answering.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { openStore, type StoreConfig } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { MESSAGES_PER_ENDPOINT } from '../../src/store/webhook-log.js';

let hole: { server: Server; sockets: Set<Socket>; url: string } | undefined;

/** The address of the endpoints: started on first use, on loopback. */
export async function blackHole(): Promise<string> {
  if (hole !== undefined) return hole.url;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.resume();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  hole = { server, sockets, url: `http://127.0.0.1:${port}/hooks` };
  return hole.url;
}

/** The attempts open on the address now (one connection each), of every server. */
export const openAttempts = (): number => hole?.sockets.size ?? 0;

/**
 * Resolves once `count` attempts are open on the address, or `timeoutMs` has passed, with how
 * many are. A server just started opens one a subscribed endpoint, within its delivery
 * budget, so not all at once.
 */
export function attemptsOpen(count: number, timeoutMs: number): Promise<number> {
  return new Promise((resolve) => {
    const server = hole?.server;
    const done = () => {
      clearTimeout(timer);
      server?.off('connection', check);
      resolve(openAttempts());
    };
    // After the listener createServer added, which counts the connection.
    const check = () => {
      if (openAttempts() >= count) done();
    };
    const timer = setTimeout(done, timeoutMs);
    server?.on('connection', check);
    check();
  });
}

/**
 * Closes the address and the attempts waiting on it, which then fail at once: a server
 * stopping afterwards has no attempt to wait for (its shutdown grace is 10 s).
 */
export async function closeBlackHole(): Promise<void> {
  if (hole === undefined) return;
  const { server, sockets } = hole;
  hole = undefined;
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/**
 * The `serve` options of a server with `endpoints` subscribed. Its attempts wait as long as
 * any may (5 minutes), not 15 s: each endpoint keeps its one attempt open through its group
 * (started just before it, bench/phases/groups.ts) instead of timing out, retrying and
 * starting another every 15 s, all 1,000 at once, while the other servers are measured.
 */
export function endpointArgs(endpoints: number): string[] {
  return [
    '--webhook-timeout',
    '300s',
    '--webhook-allow-networks',
    '127.0.0.0/8',
    '--webhook-max-endpoints',
    String(Math.max(endpoints, 100)),
  ];
}

/**
 * Subscribes `count` endpoints to `plant.created` on the database of `config`, each then
 * holding its most pending (MESSAGES_PER_ENDPOINT), as endpoints whose receivers stopped
 * answering do a moment after: the creates of that many plants (deleted again) fanned out as
 * a server would. What filling them costs is measured apart (bench/HISTORY.md).
 */
export async function subscribeEndpoints(config: StoreConfig, count: number): Promise<void> {
  if (count === 0) return;
  const url = await blackHole();
  const store = await openStore({ ...config, durability: 'process' });
  try {
    await addEndpoints(store, url, count);
    const fillers = [];
    for (let i = 0; i < MESSAGES_PER_ENDPOINT; i++) {
      fillers.push(await store.plants.insert({ name: `filler ${i}` }));
    }
    while ((await store.webhookEvents.fanOut(1000)).endpoints > 0);
    for (const plant of fillers) await store.plants.delete(plant.id);
  } finally {
    await store.close();
  }
}

/** Creates `count` endpoints subscribed to `plant.created` at `url`. */
export async function addEndpoints(store: Store, url: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await store.webhooks.create({
      url,
      events: ['plant.created'],
      description: `bench ${i + 1}`,
      secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw6Fp2s5D+bSY=',
      at: new Date(),
    });
  }
}
