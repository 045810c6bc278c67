/**
 * The webhook rows, on SQLite: how many deliveries a second one `serve` process makes to a
 * fast local receiver, and how soon a message leaves after its write on an idle server.
 * The receiver runs in this harness, beside wrk's core; the server on the servers' core.
 */
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { treeCpuSeconds } from '../harness/cpu.js';
import { PLANTSTORE_BIN, ROOT, type Server, startServer, stop } from '../harness/servers.js';
import { median } from '../harness/summary.js';
import type { PhaseContext, WebhookFacts } from './facts.js';

/**
 * A receiver answering 204, at once or, while `gate` is unresolved, once it resolves;
 * `arrived` is called with the webhook-id of each message as it is answered.
 */
async function receiver(
  arrived: (id: string) => void,
  port = 0,
  gate: Promise<void> = Promise.resolve(),
): Promise<HttpServer> {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      void gate.then(() => {
        arrived(String(request.headers['webhook-id']));
        response.writeHead(204).end();
      });
    });
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

/** A promise and the function that resolves it. */
function settable<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const closed = (server: HttpServer) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

function webhookToken(db: string): string {
  const args = ['token', 'create', '--db', db, '--scopes', 'plants:write,webhooks:write'];
  const options = { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] as ('ignore' | 'pipe')[] };
  return execFileSync(process.execPath, [PLANTSTORE_BIN, ...args], options)
    .toString()
    .trim();
}

async function post(server: Server, token: string, path: string, body: unknown): Promise<void> {
  const response = await fetch(server.url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 201) throw new Error(`POST ${path}: ${response.status} ${text}`);
}

/** Receivers on loopback are allowed; a failed first attempt waits an hour. */
const WEBHOOK_ARGS = ['--webhook-allow-networks', '127.0.0.0/8', '--webhook-retry-schedule', '1h'];

function serve(ctx: PhaseContext, name: string, db: string): Promise<Server> {
  const spec = {
    kind: 'plantstore',
    db,
    durability: 'power',
    logLevel: ctx.at.logLevel,
    extraArgs: WEBHOOK_ARGS,
  } as const;
  return startServer(name, spec, ctx.at.serverCores);
}

/**
 * A backlog of `messages` writes, made while nothing listens: the endpoint's first messages
 * are written (each first attempt fails and is put an hour off), made due again at once, and
 * the rest wait in the log. A new process sends them to the receiver, its fan-out writing the
 * next messages as the first are delivered.
 */
async function deliveryRate(ctx: PhaseContext, messages: number) {
  const db = join(ctx.dir, 'webhooks-rate.db');
  const token = webhookToken(db);
  const probe = await receiver(() => undefined);
  const { port } = probe.address() as AddressInfo;
  await closed(probe);
  const writer = await serve(ctx, 'webhooks writer', db);
  await post(writer, token, '/webhooks', { url: `http://127.0.0.1:${port}/` });
  for (let i = 0; i < messages; i += 64) {
    const batch = Array.from({ length: Math.min(64, messages - i) }, (_, j) =>
      post(writer, token, '/plants', { name: `plant ${i + j}` }),
    );
    await Promise.all(batch);
  }
  await stop(writer);
  const sqlite = new Database(db);
  sqlite.prepare('UPDATE webhook_messages SET next_attempt_at = 0, lease_until = NULL').run();
  sqlite.close();
  // The receiver holds its answers until the sender is up and its CPU read: the span
  // measured is sending alone, without the process's start.
  const gate = settable<undefined>();
  const done = settable<number>();
  const seen = new Set<string>();
  const up = await receiver(
    (id) => {
      seen.add(id);
      if (seen.size === messages) done.resolve(performance.now());
    },
    port,
    gate.promise,
  );
  const sender = await serve(ctx, 'webhooks sender', db);
  const cpuBefore = treeCpuSeconds(sender.pid);
  const opened = performance.now();
  gate.resolve(undefined);
  const last = await done.promise;
  const cpuAfter = treeCpuSeconds(sender.pid);
  await stop(sender);
  await closed(up);
  const seconds = (last - opened) / 1000;
  const cpuUsPerDelivery =
    cpuBefore === undefined || cpuAfter === undefined
      ? undefined
      : ((cpuAfter - cpuBefore) * 1e6) / messages;
  return { deliveriesPerSecond: messages / seconds, cpuUsPerDelivery };
}

/** `count` writes one at a time, each waiting for its message: the median delay. */
async function promptness(ctx: PhaseContext, count: number): Promise<number> {
  const db = join(ctx.dir, 'webhooks-prompt.db');
  const token = webhookToken(db);
  let arrived: (() => void) | undefined;
  const up = await receiver(() => arrived?.());
  const server = await serve(ctx, 'webhooks prompt', db);
  const { port } = up.address() as AddressInfo;
  await post(server, token, '/webhooks', { url: `http://127.0.0.1:${port}/` });
  const delays: number[] = [];
  for (let i = 0; i < count; i++) {
    const message = settable<undefined>();
    arrived = () => message.resolve(undefined);
    const sent = performance.now();
    await post(server, token, '/plants', { name: `plant ${i}` });
    await message.promise;
    delays.push(performance.now() - sent);
  }
  await stop(server);
  await closed(up);
  return median(delays);
}

export async function webhookPhase(ctx: PhaseContext, messages: number): Promise<WebhookFacts> {
  const rate = await deliveryRate(ctx, messages);
  ctx.log(
    `webhooks: ${rate.deliveriesPerSecond.toFixed(0)} deliveries/s from one process` +
      ` (${rate.cpuUsPerDelivery?.toFixed(0) ?? '?'} µs of its CPU each)`,
  );
  const prompt = 101;
  const promptP50ms = await promptness(ctx, prompt);
  ctx.log(`webhooks: a message leaves ${promptP50ms.toFixed(1)} ms (p50) after its write`);
  return { messages, ...rate, prompt, promptP50ms };
}
