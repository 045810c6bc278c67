import assert from 'node:assert/strict';
import { it } from 'node:test';
import fc from 'fast-check';
import type { ChangeEvent } from '../../src/core/change-events.js';
import type { WebhookEvent } from '../../src/core/webhooks/events.js';
import {
  type LogEndpoint,
  fairParts,
  MESSAGES_PER_ENDPOINT,
  messagesWanted,
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

it('endpoints behind share a fan-out equally, what one takes less of going to the others', () => {
  // 1,000 among 60 that each want 20: 17 to the first 40 read, 16 to the last 20, none left out.
  const parts = fairParts(Array<number>(60).fill(20), 1000);
  assert.deepEqual(
    [parts.slice(0, 40), parts.slice(40)].map((p) => new Set(p)),
    [new Set([17]), new Set([16])],
  );
  // 99 whose types skip what was read want none: the busy one takes its room, not a 100th.
  assert.equal(fairParts([...Array<number>(99).fill(0), 64], 1000).at(-1), 64);
  assert.deepEqual(fairParts([3, 500, 500], 1000), [3, 499, 498]);
  assert.deepEqual(fairParts([5, 5], 1000), [5, 5]);
  // More endpoints than messages: a message each to the first read, none to the rest.
  assert.deepEqual(fairParts([2, 2, 2, 2], 3), [1, 1, 1, 0]);
  assert.deepEqual(fairParts([], 1000), []);
});

it('fair parts: never over a want or the total, all of it used while wanted, max-min fair (property)', () => {
  fc.assert(
    fc.property(fc.array(fc.nat(70), { maxLength: 120 }), fc.nat(1200), (wants, total) => {
      const parts = fairParts(wants, total);
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      assert.equal(parts.length, wants.length);
      parts.forEach((part, i) => assert.ok(part >= 0 && part <= wants[i]!));
      assert.equal(sum(parts), Math.min(total, sum(wants)));
      // An endpoint given less than it wanted got no less than any other but one.
      const most = Math.max(0, ...parts);
      parts.forEach((part, i) => {
        if (part < wants[i]!) assert.ok(part >= most - 1, `${part} against ${most}`);
      });
    }),
    { seed: 20261128, numRuns: 500 },
  );
});

it('counts the messages planMove gives an endpoint with no part set (property)', () => {
  const types: WebhookEvent[] = ['plant.created', 'plant.updated', 'plant.deleted'];
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom(...types), { maxLength: 150 }),
      fc.subarray(types, { minLength: 1 }),
      fc.nat(MESSAGES_PER_ENDPOINT + 6),
      (read, subscribed, pending) => {
        const at = endpoint(pending, subscribed.join(' '));
        const events = log(...read);
        const move = planMove(at, events, 1000n);
        assert.equal(messagesWanted(at, events), move?.messages.length ?? 0);
      },
    ),
    { seed: 20261128, numRuns: 300 },
  );
});

it('counts the messages an endpoint would take: events of its types, up to its room', () => {
  const events = log('plant.created', 'plant.deleted', 'plant.created', 'plant.created');
  assert.equal(messagesWanted(endpoint(), events), 3);
  assert.equal(messagesWanted(endpoint(MESSAGES_PER_ENDPOINT - 2), events), 2);
  assert.equal(messagesWanted(endpoint(MESSAGES_PER_ENDPOINT + 1), events), 0, 'probes beyond');
  assert.equal(messagesWanted(endpoint(0, 'plant.updated'), events), 0);
  assert.equal(planMove(endpoint(), events, 99n)?.messages.length, 3, 'as planMove gives');
});
