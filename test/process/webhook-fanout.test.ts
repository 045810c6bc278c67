import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { forEachBackend } from '../helpers/backends.js';
import {
  ALLOW_LOOPBACK,
  eventually,
  serveWithWebhooks,
  webhookToken,
} from '../helpers/webhook-harness.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { MESSAGES_PER_ENDPOINT } from '../../src/store/webhook-log.js';

// The fan-out in real processes: a server killed while endpoints still have events of the
// log to get (they never answer, so each holds its most pending, and the rest wait) loses
// none of their messages and doubles none: the next server writes the rest as the messages
// end. The counter of pending messages each endpoint keeps stays exact across the kill.

const ENDPOINTS = 50;
const CREATES = 200;

interface Counts {
  plants: number;
  messages: number;
  delivered: number;
  /** Distinct (endpoint, payload) pairs among the messages: each plant's id is in its payload. */
  distinct: number;
  /** Endpoints whose `pending` differs from their messages pending. */
  miscounted: number;
}

const COUNTS = `SELECT (SELECT count(*) FROM plants) AS plants,
  (SELECT count(*) FROM webhook_messages) AS messages,
  (SELECT count(*) FROM webhook_messages WHERE status = 'delivered') AS delivered,
  (SELECT count(*) FROM (SELECT DISTINCT endpoint_id, payload FROM webhook_messages) d)
    AS pairs,
  (SELECT count(*) FROM webhook_endpoints e WHERE pending <> (SELECT count(*)
     FROM webhook_messages m WHERE m.endpoint_id = e.id AND m.status = 'pending')) AS miscounted`;

/** The counts in one statement (one snapshot), on a connection of the test's own. */
async function counts(args: string[]): Promise<Counts> {
  let row: Record<string, unknown>;
  if (args[0] === '--db') {
    const db = new Database(args[1]!, { readonly: true });
    try {
      row = db.prepare(COUNTS).get() as Record<string, unknown>;
    } finally {
      db.close();
    }
  } else {
    const client = new pg.Client({ connectionString: args[1]! });
    await client.connect();
    try {
      row = (await client.query(COUNTS)).rows[0] as Record<string, unknown>;
    } finally {
      await client.end();
    }
  }
  const n = (key: string) => Number(row[key]);
  return {
    plants: n('plants'),
    messages: n('messages'),
    delivered: n('delivered'),
    distinct: n('pairs'),
    miscounted: n('miscounted'),
  };
}

describe('webhook fan-out', () => {
  forEachBackend({ timeout: 120_000 }, (backend) => {
    it('a server killed with messages still to write loses and doubles none: the next one writes them', async (t) => {
      const { args } = await backend.fresh(t);
      const token = await webhookToken(args);
      // A receiver that does not answer, at first: each endpoint holds its most pending.
      const receiver = await startReceiver(t);
      receiver.fallback = 'hang';
      const options = [
        ...ALLOW_LOOPBACK,
        '--webhook-max-endpoints',
        String(ENDPOINTS),
        '--webhook-timeout',
        '2s',
        // Attempts that hung before the kill are tried again soon, not in minutes.
        '--webhook-retry-schedule',
        Array.from({ length: 10 }, () => '1s').join(','),
      ];
      const first = await serveWithWebhooks(t, args, options, token);
      for (let i = 0; i < ENDPOINTS; i += 10) {
        await Promise.all(
          Array.from({ length: 10 }, () => first.subscribe(receiver.url, ['plant.created'])),
        );
      }
      const refused = await first.call('POST', '/webhooks', JSON.stringify({ url: receiver.url }));
      assert.equal(refused.status, 409, 'the limit holds');
      for (let i = 0; i < CREATES; i += 40) {
        await Promise.all(
          Array.from({ length: 40 }, async (_, j) => {
            const { status } = await first.call('POST', '/plants', `{"name":"p${i + j}"}`);
            assert.equal(status, 201);
          }),
        );
      }
      first.server.child.kill('SIGKILL');
      await first.server.exited;

      const killed = await counts(args);
      t.diagnostic(`at the kill: ${killed.messages} messages`);
      assert.equal(killed.plants, CREATES);
      assert.ok(killed.messages <= ENDPOINTS * MESSAGES_PER_ENDPOINT, JSON.stringify(killed));
      assert.equal(killed.distinct, killed.messages);
      assert.equal(killed.miscounted, 0);

      receiver.fallback = 204;
      await serveWithWebhooks(t, args, options, token);
      const drained = await eventually(
        async () => {
          const now = await counts(args);
          return now.delivered === CREATES * ENDPOINTS ? now : undefined;
        },
        'every message written and delivered',
        60_000,
      );
      assert.deepEqual(drained, {
        plants: CREATES,
        messages: CREATES * ENDPOINTS,
        delivered: CREATES * ENDPOINTS,
        distinct: CREATES * ENDPOINTS,
        miscounted: 0,
      });
    });
  });
});
