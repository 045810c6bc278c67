import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { makeTempDir } from '../helpers/setup.js';

// How `serve --workers` fails: at once and visibly, never by retrying forever.

const BIN = fileURLToPath(new URL('../../bin/plantstore', import.meta.url));

async function run(args: string[], limitMs: number) {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
  clearTimeout(timer);
  return { code, signal, output };
}

test('--workers on a port already taken exits 1 instead of restarting workers forever', async (t) => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.after(() => taken.close());
  const port = String((taken.address() as { port: number }).port);
  const db = join(makeTempDir(t), 'w.db');
  const { code, signal, output } = await run(
    ['serve', '--workers', '2', '--port', port, '--db', db],
    15_000,
  );
  assert.deepEqual({ code, signal }, { code: 1, signal: null }, output);
  assert.match(output, /worker failed to start/);
});

test('--workers with --db :memory: is a usage error (each worker would have its own data)', async () => {
  const { code, output } = await run(['serve', '--workers', '2', '--db', ':memory:'], 10_000);
  assert.equal(code, 2, output);
  assert.match(output, /shared database/);
});
