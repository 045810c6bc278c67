import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { type TestContext, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { makeTempDir } from './helpers/setup.js';

// The built service as a real process, over real HTTP.

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAX = '9223372036854775807';

/** The environment without the variables the CLI reads, so only the arguments count. */
function cleanEnv(): NodeJS.ProcessEnv {
  const cli = new Set(['HOST', 'PORT', 'PLANTSTORE_DB', 'DATABASE_URL', 'LOG_LEVEL']);
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !cli.has(name)));
}

/** Resolves after `ms` without keeping the test process alive. */
const timeout = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

interface LogLine {
  msg?: string;
  [key: string]: unknown;
}

interface Server {
  child: ChildProcessWithoutNullStreams;
  url: string;
  /** Every JSON line logged so far. */
  logs: LogLine[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first logged line that `match` accepts. */
  waitForLog(match: (line: LogLine) => boolean): Promise<LogLine>;
}

/** Starts `plantstore serve --port 0` and resolves when it logs where it listens. */
async function startServer(t: TestContext, db: string): Promise<Server> {
  const child = spawn(process.execPath, ['bin/plantstore', 'serve', '--port', '0', '--db', db], {
    cwd: ROOT,
    env: cleanEnv(),
  });
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  let running = true;
  void exited.then(() => {
    running = false;
  });
  t.after(async () => {
    if (running) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const logs: LogLine[] = [];
  const waiters: { match: (line: LogLine) => boolean; resolve: (line: LogLine) => void }[] = [];
  const waitForLog = (match: (line: LogLine) => boolean) =>
    new Promise<LogLine>((resolve) => {
      const found = logs.find(match);
      if (found !== undefined) resolve(found);
      else waiters.push({ match, resolve });
    });
  createInterface({ input: child.stdout }).on('line', (text) => {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      assert.fail(`a log line is not JSON: ${text}`);
    }
    logs.push(line);
    for (const waiter of waiters.filter((w) => w.match(line))) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(line);
    }
  });
  const listening = await Promise.race([
    waitForLog((line) => /^Server listening at http:\/\//.test(line.msg ?? '')),
    exited.then(({ code }) => assert.fail(`serve exited with ${code} before listening: ${stderr}`)),
    timeout(10_000).then(() => assert.fail(`serve did not listen within 10 s: ${stderr}`)),
  ]);
  const url = /(http:\/\/\S+)/.exec(listening.msg!)![1]!;
  return { child, url, logs, exited, waitForLog };
}

async function createToken(db: string): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['bin/plantstore', 'token', 'create', '--db', db, '--name', 'e2e'],
    { cwd: ROOT, env: cleanEnv() },
  );
  return stdout.trim();
}

/** A request with the token; the answer's body as text, so ids keep every digit. */
async function send(
  server: Server,
  token: string,
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(server.url + path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body }),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

test('an answered create and delete survive kill -9 of the server, ids exact', async (t) => {
  const db = join(makeTempDir(t), 'e2e.db');
  const token = await createToken(db);
  const first = await startServer(t, db);

  const kept = await send(
    first,
    token,
    'POST',
    '/plants',
    `{"id":${MAX},"name":"Max","tag":"big"}`,
  );
  assert.equal(kept.status, 201, kept.text);
  assert.equal(kept.headers.get('location'), `/plants/${MAX}`);
  assert.equal(kept.text, `{"id":${MAX},"name":"Max","tag":"big"}`);
  const gone = await send(first, token, 'POST', '/plants', '{"id":-42,"name":"Gone"}');
  assert.equal(gone.status, 201, gone.text);
  const deleted = await send(first, token, 'DELETE', '/plants/-42');
  assert.equal(deleted.status, 204);
  assert.equal(deleted.text, '');

  first.child.kill('SIGKILL');
  assert.deepEqual(await first.exited, { code: null, signal: 'SIGKILL' });

  const second = await startServer(t, db);
  const afterDelete = await send(second, token, 'GET', '/plants/-42');
  assert.equal(afterDelete.status, 404, afterDelete.text);
  assert.match(afterDelete.text, /"error":40401/);
  const intact = await send(second, token, 'GET', `/plants/${MAX}`);
  assert.equal(intact.status, 200, intact.text);
  assert.equal(intact.text, `{"id":${MAX},"name":"Max","tag":"big"}`);
  const listed = await send(second, token, 'GET', '/plants');
  assert.equal(listed.status, 200, listed.text);
  assert.equal(listed.text, `[{"id":${MAX},"name":"Max","tag":"big"}]`);
  const again = await send(second, token, 'DELETE', '/plants/-42');
  assert.equal(again.status, 404, again.text);
});

test('SIGTERM: the process logs "stopped" and exits 0 within 5 s', async (t) => {
  const db = join(makeTempDir(t), 'e2e.db');
  const server = await startServer(t, db);
  const health = await fetch(`${server.url}/healthz`);
  assert.equal(health.status, 200);
  await health.text();
  const started = Date.now();
  server.child.kill('SIGTERM');
  const exit = await Promise.race([server.exited, timeout(5_000).then(() => 'timeout' as const)]);
  assert.deepEqual(exit, { code: 0, signal: null }, `after ${Date.now() - started} ms`);
  assert.ok(
    server.logs.some((line) => line.msg === 'stopped'),
    JSON.stringify(server.logs),
  );
});

test('SIGTERM lets a request in flight finish before exiting 0', async (t) => {
  const db = join(makeTempDir(t), 'e2e.db');
  const token = await createToken(db);
  const server = await startServer(t, db);
  const body = `{"id":${MAX},"name":"Late"}`;
  // Send the headers and half the body, stop the server, then send the rest.
  const req = request(`${server.url}/plants`, {
    method: 'POST',
    agent: false,
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      connection: 'close',
    },
  });
  const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
  });
  req.flushHeaders();
  req.write(body.slice(0, 10));
  await new Promise((resolve) => setTimeout(resolve, 300));
  server.child.kill('SIGTERM');
  await server.waitForLog((line) => line.msg === 'shutting down');
  await new Promise((resolve) => setTimeout(resolve, 200));
  req.end(body.slice(10));
  const res = await answered;
  assert.equal(res.status, 201, res.text);
  assert.equal(res.text, `{"id":${MAX},"name":"Late"}`);
  const exit = await Promise.race([server.exited, timeout(5_000).then(() => 'timeout' as const)]);
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(server.logs.some((line) => line.msg === 'stopped'));
});

test('serve listens on 127.0.0.1 when neither --host nor HOST is given', async (t) => {
  const db = join(makeTempDir(t), 'e2e.db');
  const server = await startServer(t, db);
  assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const listening = server.logs.filter((line) => /^Server listening/.test(line.msg ?? ''));
  assert.ok(
    listening.every((line) => /http:\/\/127\.0\.0\.1:/.test(line.msg!)),
    JSON.stringify(listening),
  );
  const ready = await fetch(`${server.url}/readyz`);
  assert.equal(ready.status, 200);
  await ready.text();
});
