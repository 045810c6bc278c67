import assert from 'node:assert/strict';
import { join } from 'node:path';
import { it } from 'node:test';
import Database from 'better-sqlite3';
import { cli, startServer } from '../../test/helpers/server-process.js';
import { makeTempDir } from '../../test/helpers/temp-dir.js';

// The benchmark's yardstick for what the webhook outbox costs (bench/no-outbox/) must be
// plantstore with an outbox that writes nothing, and only that: the same server otherwise.

async function outboxed(t: Parameters<typeof startServer>[0], nodeArgs: string[]) {
  const db = join(makeTempDir(t), 'plants.db');
  const scopes = 'plants:read,plants:write,webhooks:write';
  const token = (await cli(['token', 'create', '--db', db, '--scopes', scopes])).stdout.trim();
  const allow = ['--webhook-allow-networks', '127.0.0.0/8', '--webhook-retry-schedule', '1h'];
  const server = await startServer(t, ['--db', db, ...allow], [], nodeArgs);
  const post = (path: string, body: unknown) =>
    fetch(server.url + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  // Port 9 (discard) on loopback: nothing listens, the attempt fails at once, the row stays.
  assert.equal((await post('/webhooks', { url: 'http://127.0.0.1:9/' })).status, 201);
  const created = await post('/plants', { name: 'Fern' });
  assert.equal(created.status, 201);
  assert.deepEqual(await created.json(), { id: 1, name: 'Fern' });
  const sqlite = new Database(db, { readonly: true });
  try {
    // The event or, once the server's fan-out has run, its message: one statement reads both,
    // and the fan-out deletes the one and writes the other in one transaction.
    const rows = sqlite.prepare(
      `SELECT (SELECT count(*) FROM webhook_events) + (SELECT count(*) FROM webhook_messages)
         AS n`,
    );
    return (rows.get() as { n: number }).n;
  } finally {
    sqlite.close();
  }
}

it('plantstore writes an event (then a message) for a subscribed endpoint; the no-outbox yardstick none', async (t) => {
  assert.equal(await outboxed(t, []), 1);
  assert.equal(await outboxed(t, ['--import', './bench/no-outbox/register.mjs']), 0);
});
