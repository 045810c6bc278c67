import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { type Backend, forEachBackend } from '../helpers/backends.js';
import {
  ALLOW_LOOPBACK,
  type Api,
  serveWithWebhooks,
  webhookToken,
} from '../helpers/webhook-harness.js';
import { type Answer, type Receiver, startReceiver } from '../helpers/webhook-receiver.js';

// A hardening finding: receivers that never answer held every delivery slot of the process
// (64, at most 16 an endpoint), so a healthy endpoint's messages waited for the hung ones'
// timeouts. Here 20 endpoints hang (or drip their answers, or fail just before the timeout),
// each with a backlog, beside one that answers at once.

const BAD = 20;
/**
 * Short, so that the test sees the hung attempts time out and the next ones start; long
 * enough that LAG_MS, below it, leaves room for the fan-out's pace on a busy machine.
 */
const TIMEOUT_MS = 8000;
/** When a receiver that fails late answers 503: just before the attempt would time out. */
const LATE_MS = TIMEOUT_MS - 300;
/**
 * How late a healthy endpoint's message may arrive after its write was answered: below
 * LATE_MS, so that a message that waited for a hung attempt or a late failure to end fails
 * it. On a quiet machine the worst lag is 30 to 900 ms. Under load it is the fan-out's pace:
 * a CI run saw 2.8 s on PostgreSQL (2026-11-28, with a 3 s timeout and a bound of 2.5 s), its
 * batches paused after taking 250 to 350 ms on a busy machine; with ten busy loops beside the
 * test on two cores, 0.4 to 3.0 s since (webhook-fanout.ts), 0.7 to 4.3 s before; a CI run
 * on a slow machine 4.2 s (2026-11-30, with a 5 s timeout and a bound of 4 s), so the timeout
 * is 8 s and the bound 6.5 s: still 1.2 s short of the earliest end of a bad attempt.
 */
const LAG_MS = 6500;

/** Resolves with `promise`, or fails saying what did not happen within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A receiver that answers 204 at once and notes when each message arrived (by plant id). */
async function healthyReceiver(t: TestContext) {
  const receiver = await startReceiver(t);
  const arrived = new Map<string, number>();
  receiver.fallback = (response) => {
    const { body } = receiver.received.at(-1)!;
    arrived.set(/^\{"id":(-?\d+)/.exec(body)![1]!, Date.now());
    response.writeHead(204).end();
  };
  return { receiver, arrived };
}

/** Creates a plant; answers its id and when the create was answered. */
async function create(api: Api, name: string): Promise<[string, number]> {
  const { status, text } = await api.call('POST', '/plants', JSON.stringify({ name }));
  assert.equal(status, 201, text);
  return [/"id":(-?\d+)/.exec(text)![1]!, Date.now()];
}

/** Each plant's delivery lag: arrival less the create's answer; fails on one too late. */
function assertPrompt(written: Map<string, number>, arrived: Map<string, number>): number {
  let worst = -Infinity;
  for (const [id, at] of written) {
    const lag = arrived.get(id)! - at;
    assert.ok(lag <= LAG_MS, `plant ${id} reached the healthy endpoint ${lag} ms after its write`);
    worst = Math.max(worst, lag);
  }
  return worst;
}

/** A receiver that answers 200 at once, then a byte of body every 100 ms, never ending. */
const drip: Answer = (response) => {
  response.writeHead(200, { 'content-type': 'text/plain' });
  const timer = setInterval(() => response.write('.'), 100);
  response.on('close', () => clearInterval(timer));
};

/** A receiver that answers 503 just before the attempt would time out. */
const lateFailure: Answer = (response) => {
  const timer = setTimeout(() => response.writeHead(503).end(), LATE_MS);
  response.on('close', () => clearTimeout(timer));
};

/** The bad endpoints of a test: their URLs, and a wait for `count` attempts at each. */
interface BadEndpoints {
  urls: string[];
  reached(count: number): Promise<unknown>;
}

/** 20 receivers, each at its own port, answering as `answers` says. */
async function badReceivers(t: TestContext, answers: Answer[]): Promise<BadEndpoints> {
  const receivers = await Promise.all(
    answers.map(async (answer) => {
      const receiver = await startReceiver(t);
      receiver.fallback = answer;
      return receiver;
    }),
  );
  return {
    urls: receivers.map((receiver) => receiver.url),
    reached: (count) => Promise.all(receivers.map((receiver) => receiver.waitFor(count))),
  };
}

/**
 * Subscribes the bad endpoints and one healthy one (at `healthyUrl` of its receiver, when
 * given); writes a backlog of 60 messages for each, then 10 more once every bad endpoint has
 * had its first attempt end and a second begin; checks that every message reached the
 * healthy one promptly.
 */
async function healthyBeside(
  t: TestContext,
  backend: Backend,
  bad: BadEndpoints,
  healthy: { receiver: Receiver; arrived: Map<string, number>; url?: string },
) {
  const { args } = await backend.fresh(t);
  const token = await webhookToken(args);
  const api = await serveWithWebhooks(
    t,
    args,
    [...ALLOW_LOOPBACK, '--webhook-timeout', `${TIMEOUT_MS / 1000}s`],
    token,
  );
  for (const url of bad.urls) await api.subscribe(url);
  const { arrived } = healthy;
  await api.subscribe(healthy.url ?? healthy.receiver.url);
  const delivered = async (count: number) => {
    while (arrived.size < count)
      await healthy.receiver.waitFor(healthy.receiver.received.length + 1);
  };

  // A backlog: 60 messages for each bad endpoint, written 10 at a time.
  const written = new Map<string, number>();
  for (let batch = 0; batch < 6; batch++) {
    const made = await Promise.all(
      Array.from({ length: 10 }, (_, i) => create(api, `backlog ${batch}-${i}`)),
    );
    for (const [id, at] of made) written.set(id, at);
  }
  await within(bad.reached(1), 10_000, 'an attempt at every bad endpoint');
  await within(delivered(written.size), 10_000, 'the healthy endpoint has every message');
  const first = assertPrompt(written, arrived);

  // Once the first attempts have ended and the next ones begun: still no delay.
  await within(bad.reached(2), 20_000, 'a second attempt at every bad endpoint');
  const later = new Map<string, number>();
  for (let i = 0; i < 10; i++) {
    const [id, at] = await create(api, `later ${i}`);
    later.set(id, at);
    await within(delivered(written.size + later.size), 10_000, `plant ${id} delivered`);
  }
  const second = assertPrompt(later, arrived);
  t.diagnostic(`worst lag ${Math.max(first, second)} ms`);
}

/**
 * One receiver for all: 20 paths that never answer and one that answers at once, as
 * endpoints of several tenants at one relay are. Its connections are one host's: a cap on
 * connections per host held the healthy path's attempts behind the hung ones' (16 of them).
 */
async function oneHost(t: TestContext) {
  const receiver = await startReceiver(t);
  const arrived = new Map<string, number>();
  const attempts = new Map<string, number>();
  receiver.fallback = (response) => {
    const { body, path } = receiver.received.at(-1)!;
    attempts.set(path, (attempts.get(path) ?? 0) + 1);
    if (!path.endsWith('/healthy')) return;
    arrived.set(/^\{"id":(-?\d+)/.exec(body)![1]!, Date.now());
    response.writeHead(204).end();
  };
  const urls = Array.from({ length: BAD }, (_, i) => `${receiver.url}/hung-${i}`);
  const bad: BadEndpoints = {
    urls,
    async reached(count) {
      const enough = () => urls.every((url) => (attempts.get(new URL(url).pathname) ?? 0) >= count);
      while (!enough()) await receiver.waitFor(receiver.received.length + 1);
    },
  };
  return { bad, healthy: { receiver, arrived, url: `${receiver.url}/healthy` } };
}

describe('webhooks, fairness', () => {
  forEachBackend({ timeout: 90_000 }, (backend) => {
    it(`${BAD} hung receivers with backlogs do not delay a healthy one`, async (t) =>
      healthyBeside(
        t,
        backend,
        await badReceivers(t, Array<Answer>(BAD).fill('hang')),
        await healthyReceiver(t),
      ));

    it('receivers that drip their answer or fail late do not delay a healthy one', async (t) =>
      healthyBeside(
        t,
        backend,
        await badReceivers(
          t,
          Array.from({ length: BAD }, (_, i) => [drip, lateFailure, 'hang' as const][i % 3]!),
        ),
        await healthyReceiver(t),
      ));

    it(`${BAD} hung endpoints on the healthy one's host do not delay it`, async (t) => {
      const { bad, healthy } = await oneHost(t);
      await healthyBeside(t, backend, bad, healthy);
    });
  });
});
