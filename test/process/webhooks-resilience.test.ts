import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { forEachBackend } from '../helpers/backends.js';
import {
  ALLOW_LOOPBACK,
  eventually,
  serveWithWebhooks,
  statuses,
  webhookToken,
} from '../helpers/webhook-harness.js';
import { type Delivery, startReceiver } from '../helpers/webhook-receiver.js';

// Webhooks when things go wrong or run side by side: a server killed mid-attempt, several
// processes on one database, addresses refused (SSRF), a secret rotated.

const headersOf = (delivery: Delivery) => ({
  'webhook-id': String(delivery.headers['webhook-id']),
  'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
  'webhook-signature': String(delivery.headers['webhook-signature']),
});

/** Runs one statement on the test's database, beside the server (to end an overlap early). */
async function sql(args: string[], statement: string): Promise<void> {
  if (args[0] === '--db') {
    const db = new Database(args[1]!);
    try {
      db.pragma('busy_timeout = 5000');
      db.prepare(statement).run();
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: args[1]! });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/**
 * Creates `count` plants through the APIs given in turn; answers nothing. A 503 is asked
 * again, as a client would: with --workers on SQLite, a process that waits for the write
 * lock longer than the busy timeout answers 503 and writes nothing (a 503 that had written
 * would show as one message too many).
 */
async function createPlants(
  apis: { call: (m: string, p: string, b?: string) => Promise<{ status: number }> }[],
  count: number,
) {
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const create = () => apis[i % apis.length]!.call('POST', '/plants', `{"name":"p${i}"}`);
      let { status } = await create();
      for (let retries = 0; status === 503 && retries < 5; retries++) ({ status } = await create());
      assert.equal(status, 201);
    }),
  );
}

async function allDelivered(
  api: { deliveries: (id: string) => Promise<string> },
  id: string,
  count: number,
) {
  await eventually(async () => {
    const found = statuses(await api.deliveries(id));
    return found.length === count && found.every((s) => s === 'delivered') ? true : undefined;
  }, `${count} messages delivered`);
}

function pidsOf(logs: { msg?: string; pid?: number }[]): number[] {
  return [...new Set(logs.filter((l) => /^Server listening/.test(l.msg ?? '')).map((l) => l.pid!))];
}

describe('webhooks, resilience', () => {
  forEachBackend({ timeout: 90_000 }, (backend) => {
    it('sends again, same webhook-id, after the server is killed mid-attempt', async (t) => {
      const { args } = await backend.fresh(t);
      const token = await webhookToken(args);
      const options = [...ALLOW_LOOPBACK, '--webhook-timeout', '1s'];
      const first = await serveWithWebhooks(t, args, options, token);
      const receiver = await startReceiver(t);
      receiver.answers.push('hang');
      const { id } = await first.subscribe(receiver.url);
      await first.call('POST', '/plants', '{"name":"Fern"}');
      await receiver.waitFor(1);
      first.server.child.kill('SIGKILL');
      await first.server.exited;
      const second = await serveWithWebhooks(t, args, options, token);
      const [killed, again] = await receiver.waitFor(2);
      assert.equal(again!.headers['webhook-id'], killed!.headers['webhook-id']);
      await allDelivered(second, id, 1);
    });

    const together = backend.dialect === 'sqlite' ? '--workers 2' : 'two instances';
    it(`delivers each message once with ${together} while the receiver is healthy`, async (t) => {
      const { args } = await backend.fresh(t);
      const token = await webhookToken(args);
      const pids: number[] = [];
      const apis =
        backend.dialect === 'sqlite'
          ? [await serveWithWebhooks(t, args, [...ALLOW_LOOPBACK, '--workers', '2'], token, pids)]
          : [
              await serveWithWebhooks(t, args, ALLOW_LOOPBACK, token),
              await serveWithWebhooks(t, args, ALLOW_LOOPBACK, token),
            ];
      if (backend.dialect === 'sqlite') {
        await apis[0]!.server.waitForLog(
          () => pidsOf(apis[0]!.server.logs).length === 2,
          'two workers',
        );
        pids.push(...pidsOf(apis[0]!.server.logs));
      }
      const receiver = await startReceiver(t);
      const { id } = await apis[0]!.subscribe(receiver.url);
      await createPlants(apis, 60);
      await allDelivered(apis[0]!, id, 60);
      const ids = receiver.received.map((d) => d.headers['webhook-id']);
      assert.equal(ids.length, 60);
      assert.equal(new Set(ids).size, 60);
    });

    it('refuses non-public addresses at subscription, each class', async (t) => {
      const { args } = await backend.fresh(t);
      const api = await serveWithWebhooks(t, args, [], await webhookToken(args));
      const refused = {
        loopback: '127.0.0.1',
        private: '10.0.0.1',
        linkLocal: '169.254.169.254',
        carrierGradeNat: '100.64.0.1',
        uniqueLocal: '[fd00::1]',
        multicast: '224.0.0.1',
        unspecified: '0.0.0.0',
        reserved: '192.0.2.1',
        'reserved ': '[2001:db8::1]',
        'loopback ': '[::ffff:127.0.0.1]',
        'loopback  ': 'localhost',
      };
      for (const [kind, host] of Object.entries(refused)) {
        const { status, text } = await api.call(
          'POST',
          '/webhooks',
          JSON.stringify({ url: `http://${host}/h` }),
        );
        assert.equal(status, 400, host);
        assert.match(text, /"error":40011/, host);
        assert.match(text, new RegExp(`\\(${kind.trim()}\\)`), `${host}: ${text}`);
      }
    });

    it('refuses at connect time an address no longer allowed', async (t) => {
      const { args } = await backend.fresh(t);
      const token = await webhookToken(args);
      const open = await serveWithWebhooks(t, args, ALLOW_LOOPBACK, token);
      const receiver = await startReceiver(t);
      const { id } = await open.subscribe(receiver.url);
      open.server.child.kill('SIGTERM');
      await open.server.exited;
      // The same subscription, but this server does not open loopback: nothing may reach it.
      const closed = await serveWithWebhooks(t, args, [], token);
      await closed.call('POST', '/plants', '{"name":"Fern"}');
      const text = await eventually(async () => {
        const text = await closed.deliveries(id);
        return text.includes('unsafe destination') ? text : undefined;
      }, 'the refusal recorded');
      assert.match(
        text,
        /"error":"unsafe destination: 127\.0\.0\.1 is not a public address \(loopback\)/,
      );
      assert.equal(receiver.received.length, 0);
    });

    it('signs with both secrets after a rotation, then with the new one only', async (t) => {
      const { args } = await backend.fresh(t);
      const api = await serveWithWebhooks(t, args, ALLOW_LOOPBACK, await webhookToken(args));
      const receiver = await startReceiver(t);
      const { id, secret: old } = await api.subscribe(receiver.url);
      const rotated = await api.call('POST', `/webhooks/${id}/rotate-secret`);
      const fresh = /"secret":"(whsec_[^"]+)"/.exec(rotated.text)![1]!;
      await api.call('POST', '/plants', '{"name":"Fern"}');
      const [during] = await receiver.waitFor(1);
      assert.equal(String(during!.headers['webhook-signature']).split(' ').length, 2);
      for (const secret of [old, fresh])
        new Webhook(secret).verify(during!.body, headersOf(during!));
      // The 24 hours pass (the overlap's end is moved instead of waiting for it).
      const past = backend.dialect === 'sqlite' ? '1' : "'2000-01-01T00:00:00Z'";
      await sql(args, `UPDATE webhook_endpoints SET previous_until = ${past}`);
      await api.call('POST', '/plants', '{"name":"Moss"}');
      const [, after] = await receiver.waitFor(2);
      assert.equal(String(after!.headers['webhook-signature']).split(' ').length, 1);
      new Webhook(fresh).verify(after!.body, headersOf(after!));
      assert.throws(() => new Webhook(old).verify(after!.body, headersOf(after!)));
    });
  });
});
