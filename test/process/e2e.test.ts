import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import {
  cleanEnv,
  ROOT,
  type Server,
  sleep,
  startServer,
  stoppedListening,
} from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The built service as a real process, over real HTTP.

const MAX = '9223372036854775807';

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
  const first = await startServer(t, ['--db', db]);

  const kept = await send(
    first,
    token,
    'POST',
    '/plants',
    `{"id":${MAX},"name":"Max","tag":"big"}`,
  );
  assert.equal(kept.status, 201, kept.text);
  assert.equal(kept.headers.get('location'), `/plants/${MAX}`);
  assert.equal(kept.text, `{"id":${MAX},"name":"Max","tag":"big"}\n`);
  const gone = await send(first, token, 'POST', '/plants', '{"id":-42,"name":"Gone"}');
  assert.equal(gone.status, 201, gone.text);
  const deleted = await send(first, token, 'DELETE', '/plants/-42');
  assert.equal(deleted.status, 204);
  assert.equal(deleted.text, '');

  first.child.kill('SIGKILL');
  assert.deepEqual(await first.exited, { code: null, signal: 'SIGKILL' });

  const second = await startServer(t, ['--db', db]);
  const afterDelete = await send(second, token, 'GET', '/plants/-42');
  assert.equal(afterDelete.status, 404, afterDelete.text);
  assert.match(afterDelete.text, /"error":40401/);
  const intact = await send(second, token, 'GET', `/plants/${MAX}`);
  assert.equal(intact.status, 200, intact.text);
  assert.equal(intact.text, `{"id":${MAX},"name":"Max","tag":"big"}\n`);
  const listed = await send(second, token, 'GET', '/plants');
  assert.equal(listed.status, 200, listed.text);
  assert.equal(listed.text, `[{"id":${MAX},"name":"Max","tag":"big"}]\n`);
  const again = await send(second, token, 'DELETE', '/plants/-42');
  assert.equal(again.status, 404, again.text);
});

test('SIGTERM: the process logs "stopped" and exits 0 within 5 s', async (t) => {
  const db = join(makeTempDir(t), 'e2e.db');
  const server = await startServer(t, ['--db', db]);
  const health = await fetch(`${server.url}/healthz`);
  assert.equal(health.status, 200);
  await health.text();
  const started = Date.now();
  server.child.kill('SIGTERM');
  const exit = await Promise.race([server.exited, sleep(5_000).then(() => 'timeout' as const)]);
  assert.deepEqual(exit, { code: 0, signal: null }, `after ${Date.now() - started} ms`);
  assert.ok(
    server.logs.some((line) => line.msg === 'stopped'),
    JSON.stringify(server.logs),
  );
  const notJson = server.logs.filter((line) => line.msg?.startsWith('(not JSON)'));
  assert.deepEqual(notJson, [], 'every log line is JSON');
});

/**
 * A create whose body of `length` bytes is for the caller to send: the server answers 100
 * Continue once it has authenticated the request, which is in flight from then on.
 */
const createInFlight = (server: Server, token: string, length: number) =>
  request(`${server.url}/plants`, {
    method: 'POST',
    agent: false,
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'content-length': String(length),
      connection: 'close',
      expect: '100-continue',
    },
  });

test('SIGTERM lets a request in flight finish before exiting 0', async (t) => {
  const db = join(makeTempDir(t), 'e2e.db');
  const token = await createToken(db);
  const server = await startServer(t, ['--db', db]);
  const body = `{"id":${MAX},"name":"Late"}`;
  // Send the headers and half the body, stop the server, then send the rest. The server
  // answers 100 Continue once it has authenticated the request: it is in flight then.
  const req = createInFlight(server, token, Buffer.byteLength(body));
  const continued = once(req, 'continue');
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
  await continued;
  req.write(body.slice(0, 10));
  server.child.kill('SIGTERM');
  await server.waitForLog((line) => line.msg === 'shutting down');
  await stoppedListening(server);
  req.end(body.slice(10));
  const res = await answered;
  assert.equal(res.status, 201, res.text);
  assert.equal(res.text, `{"id":${MAX},"name":"Late"}\n`);
  const exit = await Promise.race([server.exited, sleep(5_000).then(() => 'timeout' as const)]);
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(server.logs.some((line) => line.msg === 'stopped'));
});

test('SIGTERM cuts off a request still running after --shutdown-grace, and says so', async (t) => {
  const db = join(makeTempDir(t), 'e2e.db');
  const token = await createToken(db);
  const server = await startServer(t, ['--db', db, '--shutdown-grace', '1s']);
  // Headers and a part of the body, and never the rest.
  const req = createInFlight(server, token, 100);
  const cut = new Promise<string>((resolve) => {
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    req.on('response', (res) => resolve(`answered ${res.statusCode}`));
  });
  const continued = once(req, 'continue');
  req.flushHeaders();
  await continued;
  req.write('{"name":');
  const silent = connect(Number(new URL(server.url).port), '127.0.0.1');
  silent.on('error', () => undefined);
  await once(silent, 'connect');
  server.child.kill('SIGTERM');
  const line = await server.waitForLog(
    (entry) => entry.msg === 'requests still running after the shutdown grace were cut off',
  );
  // The connection that never sent a request is closed too, but is no request cut off.
  assert.deepEqual({ requests: line.requests, level: line.level }, { requests: 1, level: 40 });
  assert.equal(await cut, 'ECONNRESET');
  assert.deepEqual(await server.exited, { code: 0, signal: null });
});

test('serve listens on 127.0.0.1 when neither --host nor HOST is given', async (t) => {
  const db = join(makeTempDir(t), 'e2e.db');
  const server = await startServer(t, ['--db', db]);
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
