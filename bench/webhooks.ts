// npm run bench:webhooks [-- --messages 5000 --seconds 10 --rounds 3 --baseline <git ref>]
// (builds need `npm run build` first: the servers run bin/plantstore)
//
// Two rows for the webhooks issue, on SQLite:
// 1. delivery: one `serve` process sends a backlog of messages to a fast local receiver;
//    deliveries per second from its first to its last receipt (target >= 1000/s).
// 2. outbox cost: POST /plants throughput with no endpoint subscribed, this build against
//    a build of the commit before webhooks (target: at most 5% fewer writes per second).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';

const ROOT = new URL('..', import.meta.url).pathname;
const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '5000' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    baseline: { type: 'string' },
  },
});
const MESSAGES = Number(values.messages);
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const work = mkdtempSync(join(tmpdir(), 'plantstore-bench-hooks-'));
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

interface Serving {
  url: string;
  child: ChildProcess;
}

async function serve(root: string, db: string, args: string[] = []): Promise<Serving> {
  const child = spawn(
    process.execPath,
    [
      join(root, 'bin/plantstore'),
      'serve',
      '--port',
      '0',
      '--db',
      db,
      '--rate-limit',
      'off',
      ...args,
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.add(child);
  // Read by events, not for-await: leaving a for-await loop would close the pipe the
  // server goes on logging to.
  return await new Promise<Serving>((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      text += String(chunk);
      const found = /Server listening at (http:\/\/[\d.:]+)/.exec(text);
      if (found) {
        text = '';
        resolve({ url: found[1]!, child });
      }
    });
    child.on('exit', () => reject(new Error(`serve (${root}) exited before listening`)));
  });
}

async function stopServing({ child }: Serving): Promise<void> {
  child.kill('SIGTERM');
  if (child.exitCode === null) await once(child, 'exit');
  children.delete(child);
}

function token(root: string, db: string, scopes: string): string {
  const args = ['token', 'create', '--db', db, '--scopes', scopes, '--name', 'bench'];
  return execFileSync(process.execPath, [join(root, 'bin/plantstore'), ...args], { cwd: root })
    .toString()
    .trim();
}

async function receiver(port = 0, onRequest: () => void = () => undefined) {
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      onRequest();
      response.writeHead(204).end();
    });
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

async function post(url: string, auth: string, path: string, body: string): Promise<string> {
  const response = await fetch(url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
    body,
  });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return await response.text();
}

/** Row 1: a backlog of MESSAGES, written while the receiver is down, then sent by one process. */
async function deliveryRate(): Promise<number> {
  const db = join(work, 'delivery.db');
  const auth = token(ROOT, db, 'plants:write,webhooks:write');
  const down = await receiver();
  const port = (down.address() as AddressInfo).port;
  down.close();
  const allow = ['--webhook-allow-networks', '127.0.0.0/8', '--webhook-retry-schedule', '1h'];
  const writer = await serve(ROOT, db, allow);
  await post(writer.url, auth, '/webhooks', JSON.stringify({ url: `http://127.0.0.1:${port}/` }));
  for (let i = 0; i < MESSAGES; i += 100) {
    const batch = Array.from({ length: Math.min(100, MESSAGES - i) }, (_, j) =>
      post(writer.url, auth, '/plants', `{"name":"p${i + j}"}`),
    );
    await Promise.all(batch);
  }
  await stopServing(writer);
  // The first attempts failed (nothing listened); make every message due again, at once.
  const sqlite = new Database(db);
  sqlite.prepare('UPDATE webhook_messages SET next_attempt_at = 0, lease_until = NULL').run();
  sqlite.close();
  let count = 0;
  let first = 0;
  let last = 0;
  const done = new Promise<void>((resolve) => {
    void receiver(port, () => {
      count++;
      if (count === 1) first = performance.now();
      if (count === MESSAGES) {
        last = performance.now();
        resolve();
      }
    });
  });
  const sender = await serve(ROOT, db, allow);
  await done;
  await stopServing(sender);
  return (MESSAGES - 1) / ((last - first) / 1000);
}

/** POST /plants per second for SECONDS on a fresh database, 32 keep-alive connections. */
async function writeRate(root: string, name: string): Promise<number> {
  const db = join(work, `${name}-${Math.random().toString(36).slice(2)}.db`);
  const auth = token(root, db, 'plants:write');
  const serving = await serve(root, db);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  const headers = { authorization: `Bearer ${auth}`, 'content-type': 'application/json' };
  const body = '{"name":"Fern","tag":"green"}';
  const one = () =>
    new Promise<number>((resolve, reject) => {
      const request = http.request(`${serving.url}/plants`, { method: 'POST', agent, headers });
      request.on('response', (response) => {
        response.resume().on('end', () => resolve(response.statusCode ?? 0));
      });
      request.on('error', reject);
      request.end(body);
    });
  const until = performance.now() + SECONDS * 1000;
  let created = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (performance.now() < until) {
        if ((await one()) !== 201) throw new Error(`${name}: a create failed`);
        created++;
      }
    }),
  );
  agent.destroy();
  await stopServing(serving);
  return created / SECONDS;
}

/** A build of the commit before webhooks (or `--baseline`), beside this checkout. */
function baselineBuild(): string {
  const added = execFileSync(
    'git',
    ['log', '--diff-filter=A', '--format=%H', '--', 'migrations/sqlite/0006_webhooks.sql'],
    { cwd: ROOT },
  )
    .toString()
    .trim()
    .split('\n')
    .at(-1)!;
  const ref = values.baseline ?? `${added}^`;
  const dir = join(work, 'baseline');
  execFileSync('sh', ['-c', `mkdir -p ${dir} && git archive ${ref} | tar -x -C ${dir}`], {
    cwd: ROOT,
  });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    { cwd: dir },
  );
  process.stderr.write(`baseline: ${ref}\n`);
  return dir;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const delivered = await deliveryRate();
const base = baselineBuild();
const now: number[] = [];
const before: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  before.push(await writeRate(base, 'baseline'));
  now.push(await writeRate(ROOT, 'webhooks'));
}
const cost = 1 - median(now) / median(before);
const row = (what: string, value: string, target: string, ok: boolean) =>
  `| ${what} | ${value} | ${target} | ${ok ? 'met' : 'NOT MET'} |`;
console.log('| webhooks (SQLite) | measured | target | |');
console.log('| --- | --- | --- | --- |');
console.log(row('deliveries/s, one process', delivered.toFixed(0), '>= 1000', delivered >= 1000));
console.log(
  row(
    'POST /plants/s, no endpoint: this build vs before webhooks',
    `${median(now).toFixed(0)} vs ${median(before).toFixed(0)} (${(cost * 100).toFixed(1)}% fewer)`,
    '<= 5% fewer',
    cost <= 0.05,
  ),
);
process.exit(0);
