/**
 * What is measured: each scenario's requests, expected status, and how the table is put back
 * after a turn. To add one (the webhook throughput row, say), add an entry here and name it
 * in bench/rows/plan.ts; a scenario that needs more than requests (a subscriber, a receiver) sets
 * it up in its `prepare`.
 */
import type { Contender, Scenario } from '../harness/turn.js';
import type { WrkResult } from '../harness/wrk.js';

export type ScenarioId =
  'delete' | 'post' | 'postKeyed' | 'postEndpoints' | 'getOne' | 'list' | 'tagList';

const POST_BODY = '{"name":"Bench plant","tag":"shade"}';

/**
 * DELETE walks distinct existing ids, each contender its own cursor over its own copy; the
 * ids a turn used are put back after it, so the table keeps its size.
 */
async function refillWalked(c: Contender, result: WrkResult): Promise<() => Promise<void>> {
  const first = c.cursor + 1;
  const last = c.cursor + result.sent;
  const refill = async () => {
    await c.keeper.refill(first, Math.min(last, c.plants));
    if (last > c.plants) await c.keeper.refill(1, Math.min(last - c.plants, c.plants));
  };
  await refill();
  c.cursor = last % c.plants;
  return refill;
}

/** POST adds plants above the seeded ids; they are deleted after the turn. */
async function trimCreated(c: Contender): Promise<() => Promise<void>> {
  const trim = () => c.keeper.trim(c.plants);
  await trim();
  return trim;
}

/**
 * With endpoints subscribed, the messages that ended go too (the endpoints' receiver never
 * answers, so there are none unless an attempt ran out its 300 s); the pending ones stay:
 * the endpoints hold their most pending from the start (data/endpoints.ts), as endpoints
 * whose receivers stopped answering do, and the turns measure what a create costs beside
 * them. Cleared until two clears 50 ms apart find none.
 */
async function trimCreatedAndMessages(c: Contender): Promise<() => Promise<void>> {
  await c.keeper.trim(c.plants);
  let empty = 0;
  for (let i = 0; i < 100 && empty < 2; i++) {
    empty = (await c.keeper.clearEndedMessages()) === 0 ? empty + 1 : 0;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return async () => {
    await c.keeper.trim(c.plants);
    await c.keeper.clearEndedMessages();
  };
}

/** Creates without an id, `POST_BODY` each, answered 201. */
const creates = (
  label: string,
  mode: 'static' | 'keyed',
  restore: Scenario['restore'],
): Scenario => ({
  label,
  expected: 201,
  load: { mode, method: 'POST', path: '/plants', body: POST_BODY },
  writes: true,
  restore,
  probe: { method: 'POST', path: () => '/plants', body: POST_BODY },
});

export const SCENARIOS: Record<ScenarioId, Scenario> = {
  delete: {
    label: 'DELETE /plants/{id}',
    expected: 204,
    load: { mode: 'walk', method: 'DELETE', path: '/plants/{id}' },
    writes: true,
    restore: refillWalked,
    probe: { method: 'DELETE', path: (plants) => `/plants/${plants}` },
  },
  post: creates('POST /plants', 'static', trimCreated),
  // The same creates, each with an Idempotency-Key of its own, as `plants import` and the
  // client's `idempotencyKey` send them. The yardsticks take no keys: they create as for POST.
  postKeyed: creates('POST /plants with Idempotency-Key', 'keyed', trimCreated),
  // The same creates, on servers with 0, 1 or 1,000 webhook endpoints subscribed (data/endpoints.ts).
  postEndpoints: creates(
    'POST /plants, webhook endpoints subscribed',
    'static',
    trimCreatedAndMessages,
  ),
  getOne: {
    label: 'GET /plants/{id}',
    expected: 200,
    load: { mode: 'random', method: 'GET', path: '/plants/{id}' },
    writes: false,
    probe: { method: 'GET', path: () => '/plants/12' },
  },
  list: {
    label: 'GET /plants?limit=100',
    expected: 200,
    load: { mode: 'static', method: 'GET', path: '/plants?limit=100' },
    writes: false,
    probe: { method: 'GET', path: () => '/plants?limit=100' },
  },
  // The tag filter: one plant in four carries the tag, so a page reads 100 of the tag index's
  // entries whatever the table's size.
  tagList: {
    label: 'GET /plants?tag=shade&limit=100',
    expected: 200,
    load: { mode: 'static', method: 'GET', path: '/plants?tag=shade&limit=100' },
    writes: false,
    probe: { method: 'GET', path: () => '/plants?tag=shade&limit=100' },
  },
};
