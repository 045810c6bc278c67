// Webhook endpoints whose receivers refuse every connection, beside one healthy endpoint: what
// they cost the server and the healthy endpoint's messages. Not a row: a server on a fresh
// SQLite file (from dist/, `npm run build` first), N endpoints at a closed port (each attempt
// fails at once), one receiver here answering 204; then creates one every 10 ms, and each
// create's lag from its 201 to its message at the healthy receiver.
//
//   npx tsx bench/tools/refused-endpoints.ts [--endpoints 100] [--creates 2000] [--down-after S]
//
// With --down-after, the N endpoints are at a second receiver that answers 204 until S seconds
// into the creates and then closes (every connection refused from then on): a relay going down.
//
// Prints the lag (p50, p90, p99, max; and the worst of each 100 creates, in order), the
// slowest create, the server's CPU seconds, and the attempts recorded.

import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { freePort } from '../harness/servers.js';

const { values } = parseArgs({
  options: {
    endpoints: { type: 'string', default: '100' },
    creates: { type: 'string', default: '2000' },
    'down-after': { type: 'string' },
  },
});
const endpoints = Number(values.endpoints);
const creates = Number(values.creates);
const bin = new URL('../../bin/plantstore', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'plantstore-refused-'));
const db = join(dir, 'store.db');

const cli = (args: string[]) =>
  execFileSync('node', [bin, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  }).trim();
const token = cli([
  'token',
  'create',
  '--db',
  db,
  '--name',
  'bench',
  '--scopes',
  'plants:read,plants:write,webhooks:read,webhooks:write',
]);

const arrived = new Map<string, number>();
const receiver = http.createServer((request, response) => {
  let body = '';
  request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
  request.on('end', () => {
    const id = /^\{"id":(-?\d+)/.exec(body)?.[1];
    if (id !== undefined) arrived.set(id, performance.now());
    response.writeHead(204).end();
  });
});
receiver.listen(0, '127.0.0.1');
await once(receiver, 'listening');
const healthy = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
const downAfter = values['down-after'] === undefined ? undefined : Number(values['down-after']);
const relay = http.createServer((request, response) => {
  request.resume().on('end', () => response.writeHead(204).end());
});
let closed: number;
if (downAfter === undefined) closed = await freePort();
else {
  relay.listen(0, '127.0.0.1');
  await once(relay, 'listening');
  closed = (relay.address() as AddressInfo).port;
}

const port = await freePort();
const server = spawn(
  'node',
  [
    bin,
    'serve',
    '--db',
    db,
    '--port',
    String(port),
    '--log-level',
    'warn',
    '--webhook-allow-networks',
    '127.0.0.0/8',
    '--webhook-max-endpoints',
    String(endpoints + 1),
  ],
  { stdio: ['ignore', 'ignore', 'inherit'] },
);
const base = `http://127.0.0.1:${port}`;
const call = (method: string, path: string, body: unknown) =>
  fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
for (let tries = 0; ; tries++) {
  try {
    await fetch(`${base}/plants`);
    break;
  } catch (error) {
    if (tries > 100) throw error;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
const subscribe = async (url: string) => {
  const answer = await call('POST', '/webhooks', { url, events: ['plant.created'] });
  if (answer.status !== 201) throw new Error(await answer.text());
};
for (let i = 0; i < endpoints; i++) await subscribe(`http://127.0.0.1:${closed}/refused-${i}`);
await subscribe(healthy);

const cpu = () => {
  const fields = readFileSync(`/proc/${server.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
};
const cpuBefore = cpu();
if (downAfter !== undefined) {
  setTimeout(() => {
    relay.close();
    relay.closeAllConnections();
  }, downAfter * 1000);
}
const written: [string, number][] = [];
let slowest = 0;
for (let i = 0; i < creates; i++) {
  const started = performance.now();
  const answer = await call('POST', '/plants', { name: `plant ${i}` });
  const at = performance.now();
  slowest = Math.max(slowest, at - started);
  written.push([/"id":(-?\d+)/.exec(await answer.text())![1]!, at]);
  await new Promise((resolve) => setTimeout(resolve, 10));
}
const deadline = performance.now() + 30_000;
while (arrived.size < written.length && performance.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 100));
}
const cpuSeconds = cpu() - cpuBefore;
server.kill('SIGTERM');
await once(server, 'exit');
receiver.close();

const lags = written.map(([id, at]) => (arrived.get(id) ?? Infinity) - at);
const sorted = [...lags].sort((a, b) => a - b);
const rank = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : 'never');
const worst: string[] = [];
for (let i = 0; i < lags.length; i += 100) worst.push(ms(Math.max(...lags.slice(i, i + 100))));
const store = new Database(db, { readonly: true });
const attempts = store.prepare('SELECT count(*) FROM webhook_attempts').pluck().get();
const messages = store.prepare('SELECT count(*) FROM webhook_messages').pluck().get();
store.close();
rmSync(dir, { recursive: true, force: true });
console.log(
  `${endpoints} ${downAfter === undefined ? 'refused endpoints' : `endpoints down after ${downAfter} s`}, ${creates} creates: healthy lag p50 ${ms(rank(0.5))} ms, ` +
    `p90 ${ms(rank(0.9))}, p99 ${ms(rank(0.99))}, max ${ms(rank(1))}; slowest create ` +
    `${slowest.toFixed(0)} ms; server CPU ${cpuSeconds.toFixed(1)} s; ${String(attempts)} attempts, ` +
    `${String(messages)} messages`,
);
console.log(`worst lag of each 100 creates, in ms: ${worst.join(' ')}`);
