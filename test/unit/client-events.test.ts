import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getEventListeners } from 'node:events';
import {
  type ClientOptions,
  createClient,
  type FeedEvent,
  PlantstoreError,
} from '../../packages/client/src/index.js';
import { recordingClient } from '../helpers/fake-client.js';

// The client's events() against a fetch of the test's own: when it connects again, how long
// it waits first, and what it gives up on. test/process/events-client.test.ts runs it against
// real servers.

const frame = (position: number) =>
  `id: ${position}\nevent: plant.created\ndata: {"id":${position},"name":"p${position}"}\n\n`;

/** A stream answer whose text the test writes, and which ends when the client aborts. */
class Connection {
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  readonly body = new ReadableStream<Uint8Array>({
    start: (controller) => {
      this.controller = controller;
    },
  });
  aborted = false;
  send(text: string): this {
    this.controller.enqueue(new TextEncoder().encode(text));
    return this;
  }
  end(): this {
    this.controller.close();
    return this;
  }
  attach(signal: AbortSignal | null | undefined): void {
    signal?.addEventListener('abort', () => {
      this.aborted = true;
      this.controller.error(signal.reason);
    });
  }
}

type Answer = Connection | { status: number; headers?: Record<string, string> };

/**
 * A client whose fetch gives `answers` in turn (a function is called at that moment); what it
 * sent and how long it slept.
 */
function feedClient(answers: (Answer | (() => Answer))[], options: Partial<ClientOptions> = {}) {
  const lastEventIds: (string | undefined)[] = [];
  const fetch = async (_url: string | URL | Request, init?: RequestInit) => {
    lastEventIds.push((init?.headers as Record<string, string>)['last-event-id']);
    const next = answers.shift() ?? assert.fail('more connections than answers');
    const answer = typeof next === 'function' ? next() : next;
    if (answer instanceof Connection) {
      answer.attach(init?.signal);
      return new Response(answer.body, {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
      });
    }
    return new Response(JSON.stringify({ error: 50301, message: 'not now' }), {
      status: answer.status,
      headers: { 'content-type': 'application/json', ...answer.headers },
    });
  };
  const { client, slept } = recordingClient(fetch, options);
  return { client, lastEventIds, slept };
}

async function next(feed: AsyncGenerator<FeedEvent>): Promise<bigint> {
  const step = await feed.next();
  assert.ok(!step.done, 'the iterator ended');
  return step.value.position;
}

test('events(): the time the caller takes over an event is not a quiet stream', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const open = new Connection().send(`id: 0\n\n${frame(1)}`);
  const again = new Connection().send(`id: 2\n\n${frame(3)}`);
  const { client, lastEventIds } = feedClient([open, again]);
  const stop = new AbortController();
  const feed = client.events({ signal: stop.signal, idleTimeoutMs: 1_000 });
  try {
    assert.equal(await next(feed), 1n);
    // The caller works on event 1 for a minute: the stream is not read meanwhile.
    t.mock.timers.tick(60_000);
    open.send(frame(2));
    assert.equal(await next(feed), 2n);
    assert.equal(open.aborted, false, 'the connection was given up as quiet');
    // Silence from the server while the caller waits for the next event does count.
    const third = feed.next();
    await new Promise((resolve) => setImmediate(resolve));
    t.mock.timers.tick(1_000);
    const step = await third;
    assert.equal(open.aborted, true, 'a quiet stream is given up');
    assert.equal(step.done ? undefined : step.value.position, 3n);
    assert.deepEqual(lastEventIds, [undefined, '2'], 'opened again after the last event');
  } finally {
    stop.abort();
    await feed.return();
  }
});

test('events(): a proxy timeout and a server error are waited out, a refusal is not', async () => {
  for (const status of [408, 500, 504]) {
    const { client, lastEventIds, slept } = feedClient([
      { status },
      new Connection().send(`id: 0\n\n${frame(1)}`),
    ]);
    const stop = new AbortController();
    const feed = client.events({ signal: stop.signal, backoffMs: 100 });
    assert.equal(await next(feed), 1n, `after a ${status}`);
    assert.equal(slept.length, 1, `one wait after a ${status}`);
    assert.ok(slept[0]! >= 50 && slept[0]! <= 100, `a backoff of 50 to 100 ms: ${slept[0]}`);
    assert.equal(lastEventIds.length, 2);
    stop.abort();
    await feed.return();
  }
  for (const status of [400, 401, 403, 404, 410]) {
    const { client, slept } = feedClient([{ status }]);
    await assert.rejects(
      client.events().next(),
      (error) => error instanceof PlantstoreError && error.status === status,
    );
    assert.deepEqual(slept, [], `no wait after a ${status}`);
  }
});

test('events(): a stream ended with no event is opened again after a wait, one ended after events at once', async () => {
  const { client, lastEventIds, slept } = feedClient([
    new Connection().send('id: 5\n\n').end(),
    new Connection().send('id: 5\n\n').end(),
    new Connection().send(`id: 5\n\n${frame(6)}`).end(),
    new Connection().send(`id: 6\n\n${frame(7)}`),
  ]);
  const stop = new AbortController();
  const feed = client.events({ after: 5n, signal: stop.signal, backoffMs: 100 });
  assert.equal(await next(feed), 6n);
  assert.equal(await next(feed), 7n);
  assert.equal(slept.length, 2, 'a wait after each empty stream, none after events');
  assert.ok(slept[1]! > slept[0]! / 2 && slept[1]! >= 100, `growing: ${slept.join(', ')}`);
  assert.deepEqual(lastEventIds, ['5', '5', '5', '6']);
  stop.abort();
  await feed.return();
});

test('events(): a stream that lasted and ended with no event is opened again at once', async () => {
  let clock = 0;
  const { client, slept } = feedClient(
    [
      () => {
        clock += 60_000; // open a minute on a quiet feed, then the server shut down
        return new Connection().send('id: 5\n\n').end();
      },
      new Connection().send('id: 5\n\n').end(),
      new Connection().send(`id: 5\n\n${frame(6)}`),
    ],
    { now: () => clock },
  );
  const stop = new AbortController();
  const feed = client.events({ after: 5n, signal: stop.signal, backoffMs: 100 });
  assert.equal(await next(feed), 6n);
  assert.equal(slept.length, 1, 'no wait after the one that lasted, one after the short one');
  assert.ok(slept[0]! <= 100, 'the backoff starts over after a connection that lasted');
  stop.abort();
  await feed.return();
});

test('events(): its waits between connections leave no listener on the signal', async () => {
  const answers = [
    ...Array.from({ length: 12 }, () => new Connection().send('id: 0\n\n').end()),
    new Connection().send(`id: 0\n\n${frame(1)}`),
  ];
  const fetch = async (_url: string | URL | Request, init?: RequestInit) => {
    const answer = answers.shift() ?? assert.fail('more connections than answers');
    answer.attach(init?.signal);
    return new Response(answer.body, { headers: { 'content-type': 'text/event-stream' } });
  };
  // The client's own waits, not the test's: 1 to 2 ms each.
  const client = createClient({ baseUrl: 'http://plants.test:8080/', token: 'pst_x', fetch });
  const stop = new AbortController();
  const feed = client.events({ signal: stop.signal, backoffMs: 1, maxBackoffMs: 2 });
  assert.equal(await next(feed), 1n);
  // The open stream's own listener only.
  assert.equal(getEventListeners(stop.signal, 'abort').length, 1);
  stop.abort();
  await feed.return();
});
