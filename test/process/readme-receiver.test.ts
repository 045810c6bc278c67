import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { it } from 'node:test';
import { newSecret, signatureHeader } from '../../src/core/webhooks/signature.js';
import { ALLOW_LOOPBACK, serveWithWebhooks, webhookToken } from '../helpers/webhook-harness.js';
import { freePort } from '../helpers/webhook-receiver.js';
import { ROOT } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The receiver docs/webhooks.md shows, run as it is written: it takes a real delivery with an
// id above 2^53 without losing a digit, and refuses a bad signature and a stale timestamp.

function documentedReceiver(): string {
  const page = readFileSync(join(ROOT, 'docs', 'webhooks.md'), 'utf8');
  const block = /```js\n(\/\/ receiver\.mjs\n[\s\S]*?)```/.exec(page);
  assert.ok(block, 'docs/webhooks.md has a ```js block starting with // receiver.mjs');
  const code = block[1]!;
  assert.ok(code.split('\n').length <= 30, 'the receiver stays short');
  return code;
}

it('the receiver of docs/webhooks.md verifies, keeps int64 ids exact and refuses forgeries', async (t) => {
  // Beside node_modules, so that its import of standardwebhooks resolves.
  const dir = join(ROOT, '.tmp');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `receiver-${randomBytes(4).toString('hex')}.mjs`);
  writeFileSync(file, documentedReceiver());
  t.after(() => rmSync(file, { force: true }));

  const db = ['--db', join(makeTempDir(t), 'readme.db')];
  const api = await serveWithWebhooks(t, db, ALLOW_LOOPBACK, await webhookToken(db));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const { secret } = await api.subscribe(url);

  const child = spawn(process.execPath, [file], {
    env: { ...process.env, WEBHOOK_SECRET: secret, PORT: String(port) },
  });
  t.after(() => child.kill('SIGKILL'));
  // An iterator keeps the lines that arrive before they are asked for.
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  await waitForPort(url);

  const id = '9223372036854775807';
  await api.call('POST', '/plants', `{"id":${id},"name":"Fern"}`);
  assert.equal((await lines.next()).value, `plant.created ${id} Fern`);

  const body = '{"id":1,"name":"Forged"}';
  const now = Math.floor(Date.now() / 1000);
  const post = (timestamp: number, key: string) =>
    fetch(url, {
      method: 'POST',
      body,
      headers: {
        'webhook-id': 'msg_forged',
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signatureHeader([key], 'msg_forged', timestamp, body),
      },
    });
  assert.equal((await post(now, newSecret())).status, 401);
  assert.equal((await post(now - 3600, secret)).status, 401);
  assert.equal((await post(now, secret)).status, 204);
  assert.equal((await lines.next()).value, 'undefined 1 Forged');
});

/** Resolves once something answers at `url` (the receiver has started listening). */
async function waitForPort(url: string): Promise<void> {
  for (;;) {
    try {
      await fetch(url, { method: 'POST', body: '' });
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}
