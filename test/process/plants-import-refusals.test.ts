import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { plants, serverWithToken } from '../helpers/plants-cli.js';
import { makeTempDir } from '../helpers/setup.js';

// `plantstore plants import` meeting what a server refuses before it has read a body: real
// CLI processes, against a real server and against one that drops every connection.

test('import does not send a line over the body limit, and imports the others', async (t) => {
  const { dir, env, server } = await serverWithToken(t);
  const file = join(dir, 'plants.jsonl');
  const big = `{"name": "${'x'.repeat(70_000)}"}`;
  writeFileSync(file, ['{"name": "Fern"}', big, '{"name": "Aloe"}', ''].join('\n'));

  const run = await plants(['import', file, '--json'], env);
  assert.equal(run.code, 1, 'failed lines: exit status 1');
  const message =
    "not sent: 70011 bytes as a request body, over the server's limit of 65536 bytes (64 KiB)";
  assert.deepEqual(JSON.parse(run.stdout), { line: 2, message });
  assert.equal(
    run.stderr,
    `${file}: 3 lines: 2 created, 0 created by an earlier run, 1 failed\nline 2: ${message}\n`,
  );
  const exported = await plants(['export'], env);
  assert.equal(exported.stdout, '{"id":1,"name":"Fern"}\n{"id":2,"name":"Aloe"}\n');
  assert.deepEqual(
    server.logs.filter((line) => line.status === 413),
    [],
    'the server never saw the long line',
  );
});

test('a server that drops a request while it is sent was reached: the import goes on', async (t) => {
  // As a server refusing a body it has not read yet can look to a client still writing it:
  // the connection reset under the write (EPIPE, ECONNRESET), the answer never read.
  const dropper = createServer((socket) => {
    socket.once('data', () => socket.resetAndDestroy());
  });
  dropper.listen(0, '127.0.0.1');
  await once(dropper, 'listening');
  t.after(() => dropper.close());
  const url = `http://127.0.0.1:${(dropper.address() as AddressInfo).port}`;
  const env = { PLANTSTORE_URL: url, PLANTSTORE_TOKEN: 'pst_any' };
  const file = join(makeTempDir(t), 'plants.jsonl');
  writeFileSync(file, '{"name": "a"}\n{"name": "b"}\n{"name": "c"}\n');

  const run = await plants(['import', file, '--concurrency', '2'], env);
  assert.equal(run.code, 1);
  const [summary, ...failures] = run.stderr.trimEnd().split('\n');
  assert.equal(summary, `${file}: 3 lines: 0 created, 0 created by an earlier run, 3 failed`);
  assert.equal(failures.length, 3, run.stderr);
  failures.forEach((failure, i) =>
    assert.match(
      failure,
      new RegExp(
        `^line ${i + 1}: the server closed the connection before answering \\(.+\\): ` +
          'it may have been created; running the import again is safe$',
      ),
    ),
  );

  const create = await plants(['create', '--name', 'a'], env);
  assert.equal(create.code, 1);
  assert.match(
    create.stderr,
    new RegExp(`^plantstore: ${url} closed the connection before answering \\(.+\\)\\n$`),
  );
});

test('a token the server refuses stops the import at once', async (t) => {
  const { dir, env } = await serverWithToken(t);
  const file = join(dir, 'plants.jsonl');
  writeFileSync(file, '{"name": "Fern"}\n'.repeat(500));
  const run = await plants(['import', file], { ...env, PLANTSTORE_TOKEN: 'pst_not_a_token' });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /stopped at line \d+: .*\(check --token or PLANTSTORE_TOKEN\)/);
  const [summary] = run.stderr.split('\n');
  const failed = Number(/(\d+) failed/.exec(summary!)?.[1]);
  assert.ok(failed < 10, `stopped within the lines in flight, not after all 500: ${summary}`);
});
