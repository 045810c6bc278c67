// What the webhook tools (endpoint-burst.ts, delivery-drain.ts) share: a receiver here that
// answers every message 204, and a schema whose endpoints all send it `plant.created`.

import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { openStore, type StoreConfig } from '../../src/store/open.js';
import { addEndpoints } from '../data/endpoints.js';

export interface HealthyReceiver {
  /** The URL endpoints subscribe with. */
  url: string;
  /** Messages received, and connections opened to it, so far. */
  delivered(): number;
  connections(): number;
  /** Resolves once `count` messages have been received in all. */
  until(count: number): Promise<void>;
  close(): void;
}

export async function healthyReceiver(): Promise<HealthyReceiver> {
  let delivered = 0;
  let connections = 0;
  const waits: { count: number; resolve: () => void }[] = [];
  // Node's default keeps a connection 5 s idle: a new one is the sender's choice.
  const server = http.createServer((request, response) => {
    request.resume().on('end', () => {
      delivered += 1;
      response.writeHead(204).end();
      for (const wait of waits.filter((w) => delivered >= w.count)) {
        waits.splice(waits.indexOf(wait), 1);
        wait.resolve();
      }
    });
  });
  server.on('connection', () => (connections += 1));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    delivered: () => delivered,
    connections: () => connections,
    until: (count) =>
      delivered >= count
        ? Promise.resolve()
        : new Promise<void>((resolve) => waits.push({ count, resolve })),
    close: () => server.close(),
  };
}

/** Subscribes `count` endpoints of the store of `config` to `plant.created` at `url`. */
export async function subscribeEndpoints(
  config: StoreConfig,
  url: string,
  count: number,
): Promise<void> {
  const store = await openStore({ ...config, durability: 'process' });
  try {
    await addEndpoints(store, url, count);
  } finally {
    await store.close();
  }
}
