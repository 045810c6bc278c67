import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { SQLITE } from '../helpers/backends.js';
import { readEvents } from '../helpers/event-stream.js';
import { cli, runCli, type Server, sleep, startServer } from '../helpers/server-process.js';

// Issue 26, item 3: an event stream is bounded like any answer. A client that stops reading is
// cut off by the send timeout, and its slot is free again; a thousand idle streams cost a
// stated amount of memory; streams end cleanly when the server shuts down; the options are
// checked. Real processes on SQLite (the bounds are the HTTP edge's, the same on both), built
// from dist/ (npm run build).

async function tokenFor(file: string): Promise<string> {
  const { stdout } = await cli([
    'token',
    'create',
    '--db',
    file,
    '--scopes',
    'events:read,plants:write',
  ]);
  return stdout.trim();
}

/** Opens an event stream on a socket of its own; resolves once the answer's head arrived. */
function rawStream(url: string, token: string, read = true): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `GET /events HTTP/1.1\r\nHost: ${hostname}\r\nAccept: text/event-stream\r\n` +
          `Authorization: Bearer ${token}\r\n\r\n`,
      );
    });
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      if (!head.startsWith('HTTP/1.1 200')) reject(new Error(head.split('\r\n', 1)[0]));
      else {
        if (!read) socket.pause();
        resolve(socket);
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

const rssKiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

test(
  'a client that stops reading is cut off by the send timeout, and its slot is freed',
  { skip: SQLITE.skip },
  async (t) => {
    const db = await SQLITE.fresh(t);
    const file = (db as { file: string }).file;
    await cli(['migrate', '--db', file]);
    // 40,000 events of 100-character names, about 6 MB of stream: more than the kernel's
    // buffers on both sides hold, so the server finds its answer stuck.
    const seed = new Database(file);
    seed
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40000)
       INSERT INTO audit_log (at, action, plant_id, after_name)
       SELECT ?, 'create', i, printf('%.100c', 'x') FROM n`,
      )
      .run(Date.now());
    seed.close();
    const token = await tokenFor(file);
    const server = await startServer(t, [
      '--db',
      file,
      '--send-timeout',
      '1s',
      '--max-event-streams',
      '1',
    ]);
    const stalled = await rawStream(server.url, token, false);
    t.after(() => stalled.destroy());
    const started = Date.now();
    await server.waitForLog(
      (line) => line.reason === 'answer not read within the send timeout',
      'the stalled stream cut off',
      20_000,
    );
    t.diagnostic(`the stalled stream was cut ${Date.now() - started} ms after it began`);
    // The one slot is free again: a new stream is served.
    let next: Socket | undefined;
    for (let i = 0; next === undefined; i++) {
      next = await rawStream(server.url, token).catch(async (error: Error) => {
        assert.ok(i < 20 && /503/.test(error.message), error.message);
        await sleep(100);
        return undefined;
      });
    }
    next.destroy();
  },
);

test(
  'a thousand idle streams: memory stated, and each hears a create',
  { skip: SQLITE.skip, timeout: 120_000 },
  async (t) => {
    const db = await SQLITE.fresh(t);
    const file = (db as { file: string }).file;
    await cli(['migrate', '--db', file]);
    const token = await tokenFor(file);
    const running = await startServer(t, ['--db', file]);
    const pid = running.child.pid!;
    const sockets: Socket[] = [];
    t.after(() => sockets.forEach((socket) => socket.destroy()));
    // Warm: a first stream, so that what it loads once is not counted per stream.
    sockets.push(await rawStream(running.url, token));
    await sleep(500);
    const before = rssKiB(pid);
    for (let i = 0; i < 1000; i += 50) {
      sockets.push(
        ...(await Promise.all(Array.from({ length: 50 }, () => rawStream(running.url, token)))),
      );
    }
    await sleep(1000);
    const after = rssKiB(pid);
    const perStream = (after - before) / 1000;
    t.diagnostic(
      `RSS ${(before / 1024).toFixed(1)} MiB with 1 stream, ${(after / 1024).toFixed(1)} MiB ` +
        `with 1,001: ${perStream.toFixed(1)} KiB a stream`,
    );
    assert.ok(perStream < 64, `${perStream} KiB a stream`);

    const arrivals: number[] = [];
    const heard = sockets.map(
      (socket) =>
        new Promise<void>((resolve) => {
          let text = '';
          const onData = (chunk: Buffer) => {
            text += chunk.toString();
            if (!text.includes('event: plant.created')) return;
            arrivals.push(Date.now());
            socket.off('data', onData);
            resolve();
          };
          socket.on('data', onData);
        }),
    );
    const begun = Date.now();
    const res = await fetch(`${running.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"name":"Fern"}',
    });
    assert.equal(res.status, 201);
    const answered = Date.now();
    await Promise.all(heard);
    t.diagnostic(
      `the create was answered ${answered - begun} ms after it was sent; the first stream had ` +
        `it ${Math.min(...arrivals) - begun} ms after, all 1,001 ${Math.max(...arrivals) - begun} ms after`,
    );
  },
);

test(
  'streams end cleanly on shutdown, and a long poll is answered',
  { skip: SQLITE.skip },
  async (t) => {
    const db = await SQLITE.fresh(t);
    const file = (db as { file: string }).file;
    await cli(['migrate', '--db', file]);
    const token = await tokenFor(file);
    const server: Server = await startServer(t, ['--db', file]);
    const streams = await Promise.all(
      [1, 2].map(() => readEvents(t, `${server.url}/events`, token)),
    );
    const poll = fetch(`${server.url}/events?wait=60s`, {
      headers: { authorization: `Bearer ${token}` },
    });
    await sleep(300);
    const stopping = Date.now();
    server.child.kill('SIGTERM');
    for (const stream of streams) assert.equal(await stream.ended, 'ended');
    const polled = await poll;
    assert.equal(polled.status, 200);
    assert.deepEqual(await polled.json(), []);
    assert.deepEqual(await server.exited, { code: 0, signal: null });
    const ms = Date.now() - stopping;
    t.diagnostic(`streams ended and the server exited ${ms} ms after SIGTERM`);
    assert.ok(ms < 5_000, `${ms} ms: streams must not wait for the shutdown grace`);
  },
);

test('--events-retention and --max-event-streams are checked', async () => {
  for (const [args, message] of [
    [['--events-retention', '30s'], /shorter than the least retention, 1m/],
    [['--events-retention', 'week'], /not a duration/],
    [['--max-event-streams', '0'], /not a number of streams/],
  ] as const) {
    const run = await runCli(['serve', '--db', ':memory:', ...args]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, message);
  }
  const help = await runCli(['serve', '--help']);
  assert.match(help.stdout, /--events-retention <duration>[^-]*\(default: 7d,/);
  assert.match(help.stdout, /--max-event-streams <n>/);
});
