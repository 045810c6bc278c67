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

// The fan-out in real processes: a server killed while plant writes' events wait to be
// fanned out (a backlog: many endpoints, and the fan-out takes a tenth of the time at most)
// loses none of them and doubles none: the next server fans them out.

const ENDPOINTS = 50;
const CREATES = 200;

interface Counts {
  plants: number;
  events: number;
  messages: number;
  /** Distinct (endpoint, payload) pairs among the messages: each plant's id is in its payload. */
  distinct: number;
}

const COUNTS = `SELECT (SELECT count(*) FROM plants) AS plants,
  (SELECT count(*) FROM webhook_events) AS events,
  (SELECT count(*) FROM webhook_messages) AS messages,
  (SELECT count(*) FROM (SELECT DISTINCT endpoint_id, payload FROM webhook_messages) d)
    AS pairs`;

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
    events: n('events'),
    messages: n('messages'),
    distinct: n('pairs'),
  };
}

describe('webhook fan-out', () => {
  forEachBackend({ timeout: 120_000 }, (backend) => {
    it('a server killed with events waiting loses and doubles none: the next one fans them out', async (t) => {
      const { args } = await backend.fresh(t);
      const token = await webhookToken(args);
      // A receiver that never answers: the attempts wait out their timeout, and the
      // dispatcher stays out of the way of the fan-out being measured.
      const receiver = await startReceiver(t);
      receiver.fallback = 'hang';
      const options = [...ALLOW_LOOPBACK, '--webhook-max-endpoints', String(ENDPOINTS)];
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
      t.diagnostic(`at the kill: ${killed.events} events waiting, ${killed.messages} messages`);
      assert.equal(killed.plants, CREATES);
      assert.ok(killed.events > 0, `events still waiting at the kill: ${JSON.stringify(killed)}`);
      // 20 events of 50 messages a fan-out: none is ever cut off half-way.
      assert.equal(killed.messages, (CREATES - killed.events) * ENDPOINTS, 'every event or none');
      assert.equal(killed.distinct, killed.messages);

      await serveWithWebhooks(t, args, options, token);
      const drained = await eventually(async () => {
        const now = await counts(args);
        return now.events === 0 ? now : undefined;
      }, 'the events fanned out');
      assert.deepEqual(drained, {
        plants: CREATES,
        events: 0,
        messages: CREATES * ENDPOINTS,
        distinct: CREATES * ENDPOINTS,
      });
    });
  });
});
