import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ChangeEvent } from '../../src/core/change-events.js';
import type { WebhookEvent } from '../../src/core/webhooks/events.js';
import {
  type LogEndpoint,
  MESSAGES_PER_ENDPOINT,
  messagesPerEndpoint,
  planMove,
  SCAN_PER_ENDPOINT,
} from '../../src/store/webhook-log.js';

// Where an endpoint's position moves in one fan-out, and which events it gets: the one rule
// both databases' fan-outs follow (webhook-log.ts).

const endpoint = (pending = 0, events = 'plant.created'): LogEndpoint => ({
  id: 7n,
  position: 10n,
  events,
  pending,
});

/** Events at the positions given (11, 12, ...), of the types given in turn. */
const log = (...types: WebhookEvent[]): ChangeEvent[] =>
  types.map((type, i) => ({
    position: 11n + BigInt(i),
    type,
    at: new Date(1_700_000_000_000 + i),
    data: `{"id":${i + 1},"name":"p"}`,
  }));

const positions = (move: ReturnType<typeof planMove>) =>
  move?.messages.map((message) => JSON.parse(message.payload).id as number);

it('takes its types, passes the others, and moves to the head when the log ends there', () => {
  const move = planMove(endpoint(), log('plant.created', 'plant.deleted', 'plant.created'), 20n);
  assert.equal(move?.to, 20n);
  assert.equal(move?.from, 10n);
  assert.deepEqual(positions(move), [1, 3]);
  assert.match(move!.messages[0]!.webhookId, /^msg_[0-9a-f]{32}$/);
  assert.equal(
    move!.messages[0]!.webhookId.slice(4, 16),
    (1_700_000_000_000).toString(16).padStart(12, '0'),
  );
});

it('an endpoint with nothing to get still moves to the head: those positions are final', () => {
  assert.deepEqual(positions(planMove(endpoint(), [], 20n)), []);
  assert.equal(planMove(endpoint(), [], 20n)?.to, 20n);
  assert.equal(planMove(endpoint(), [], 10n), undefined, 'already there');
});

it('stops before the first event it has no room for, past the ones it passed', () => {
  const full = MESSAGES_PER_ENDPOINT - 2;
  const events = log(
    'plant.created',
    'plant.deleted',
    'plant.created',
    'plant.deleted',
    'plant.created',
  );
  const move = planMove(endpoint(full), events, 99n);
  assert.deepEqual(positions(move), [1, 3]);
  assert.equal(move?.to, 14n, 'the deleted event at 14 passed; 15, a create, waits');
});

it('moves over all it read, no further, when it read as many as it asked', () => {
  const move = planMove(endpoint(), log('plant.deleted', 'plant.deleted', 'plant.deleted'), 99n, 3);
  assert.deepEqual(positions(move), []);
  assert.equal(move?.to, 13n, 'the log may go on after 13');
});

it('an endpoint without room does not move', () => {
  assert.equal(planMove(endpoint(MESSAGES_PER_ENDPOINT), log('plant.created'), 99n), undefined);
});

it('takes at most `most` messages, stopping before the next event it would take', () => {
  const events = log('plant.created', 'plant.deleted', 'plant.created', 'plant.created');
  const move = planMove(endpoint(), events, 99n, SCAN_PER_ENDPOINT, 2);
  assert.deepEqual(positions(move), [1, 3]);
  assert.equal(move?.to, 13n, 'the create at 14 waits for the next fan-out');
});

it('an endpoint behind gets an equal part of a fan-out, at least one message', () => {
  assert.equal(messagesPerEndpoint(1000, 21), 47);
  assert.equal(messagesPerEndpoint(1000, 60), 16, 'at 17, 59 of them would fill it');
  assert.equal(messagesPerEndpoint(1000, 1), 1000);
  assert.equal(messagesPerEndpoint(10, 100), 1);
  assert.equal(messagesPerEndpoint(1000, 0), 1000);
});
