import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { describe, it, type TestContext } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { noMetrics } from '../../src/core/metrics.js';
import { silentLog, type Log } from '../../src/core/log.js';
import type {
  OutboundMessage,
  SendOutcome,
  WebhookSender,
} from '../../src/core/webhooks/delivery.js';
import { newSecret } from '../../src/core/webhooks/signature.js';
import { type DispatcherOptions, WebhookDispatcher } from '../../src/service/webhook-dispatcher.js';
import type {
  AttemptRecord,
  ClaimedMessage,
  ClaimShares,
  NextStep,
  WebhookQueue,
} from '../../src/store/store.js';

// The dispatcher against a queue in memory and a sender that answers what the test says:
// outcomes become the right next steps, wake-ups, bounds on attempts in flight, stopping.

interface Finished {
  message: ClaimedMessage;
  record: AttemptRecord;
  next: NextStep;
}

class MemoryQueue extends EventEmitter implements WebhookQueue {
  readonly pending: Omit<ClaimedMessage, 'claimedUntil' | 'attempt'>[] = [];
  readonly finished: Finished[] = [];
  readonly calls: string[] = [];
  /** Claims given back: which message, and whether its lease was kept. */
  readonly released: { id: bigint; kept: boolean }[] = [];
  private readonly subscribers = new Set<() => void>();
  private readonly leased = new Map<bigint, ClaimedMessage>();

  add(count: number, endpointId = 1n, secrets = [SECRET]): void {
    for (let i = 0; i < count; i++) {
      const id = BigInt(this.pending.length + this.finished.length + 1);
      this.pending.push({
        id,
        webhookId: `msg_${id}`,
        eventType: 'plant.created',
        payload: `{"id":${id},"name":"Fern"}`,
        createdAt: new Date(),
        endpoint: { id: endpointId, url: `http://hooks.test/${endpointId}`, secrets },
      });
    }
    for (const listener of this.subscribers) listener();
  }

  async claim(
    now: Date,
    leaseMs: number,
    limit: number,
    shares?: ClaimShares,
  ): Promise<ClaimedMessage[]> {
    this.calls.push(`claim ${limit}`);
    const taken = new Map<bigint, number>();
    const withinShare = ({ endpoint: { id } }: { endpoint: { id: bigint } }) => {
      taken.set(id, (taken.get(id) ?? 0) + 1);
      return taken.get(id)! <= (shares?.endpoints.get(id) ?? shares?.perEndpoint ?? limit);
    };
    const free = this.pending
      .filter((m) => !this.leased.has(m.id))
      .filter(withinShare)
      .slice(0, limit);
    return free.map((m) => {
      const claimed = { ...m, attempt: 1, claimedUntil: new Date(now.getTime() + leaseMs) };
      this.leased.set(m.id, claimed);
      return claimed;
    });
  }

  async finish(id: bigint, until: Date, record: AttemptRecord, next: NextStep): Promise<boolean> {
    const message = this.leased.get(id)!;
    assert.equal(message.claimedUntil.getTime(), until.getTime());
    this.leased.delete(id);
    this.pending.splice(
      this.pending.findIndex((m) => m.id === id),
      1,
    );
    this.finished.push({ message, record, next });
    this.emit('finished');
    return true;
  }

  async release(id: bigint, until: Date, freeAt: Date): Promise<boolean> {
    const message = this.leased.get(id);
    if (message?.claimedUntil.getTime() !== until.getTime()) return false;
    const kept = freeAt.getTime() === until.getTime();
    if (!kept) this.leased.delete(id);
    this.released.push({ id, kept });
    this.emit('released');
    return true;
  }

  async depth(): Promise<number> {
    return this.pending.length;
  }

  /** When the next message falls due after a claim at `after`; tests set their own. */
  nextDue: (after: Date) => Promise<Date | null> = async () => null;

  async purge(before: Date): Promise<number> {
    this.calls.push(`purge ${before.toISOString()}`);
    return 0;
  }

  async disableFailing(since: Date): Promise<number> {
    this.calls.push(`disable ${since.toISOString()}`);
    return 0;
  }

  onMessages(listener: () => void): () => void {
    this.subscribers.add(listener);
    return () => this.subscribers.delete(listener);
  }

  async waitFinished(count: number): Promise<void> {
    while (this.finished.length < count) await once(this, 'finished');
  }
}

const SECRET = newSecret();

/** A sender whose answers the test gives, one call at a time or all alike. */
class ScriptedSender extends EventEmitter implements WebhookSender {
  readonly sent: OutboundMessage[] = [];
  inFlight = 0;
  maxInFlight = 0;
  constructor(
    private readonly answer: (
      m: OutboundMessage,
      signal?: AbortSignal,
    ) => Promise<Partial<SendOutcome>>,
  ) {
    super();
  }
  async send(message: OutboundMessage, signal?: AbortSignal): Promise<SendOutcome> {
    this.sent.push(message);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    this.emit('sent');
    try {
      const outcome = await this.answer(message, signal);
      return {
        status: null,
        error: null,
        durationMs: 3,
        excerpt: '',
        retryAfterMs: null,
        ...outcome,
      };
    } finally {
      this.inFlight--;
    }
  }
}

const status =
  (code: number, more: Partial<SendOutcome> = {}) =>
  () =>
    Promise.resolve({ status: code, ...more });

const NOW = new Date(Date.UTC(2024, 0, 1));

function dispatcher(
  t: TestContext,
  options: Partial<DispatcherOptions> & Pick<DispatcherOptions, 'queue' | 'sender'>,
) {
  const made = new WebhookDispatcher({
    log: silentLog,
    timeoutMs: 1000,
    now: () => NOW,
    random: () => 0.5,
    pollMs: 60_000,
    ...options,
  });
  t.after(() => made.stop(0));
  made.start();
  return made;
}

describe('WebhookDispatcher', () => {
  it('signs with every secret and records a 2xx as delivered', async (t) => {
    const queue = new MemoryQueue();
    const previous = newSecret();
    queue.add(1, 1n, [SECRET, previous]);
    const sender = new ScriptedSender(status(204, { excerpt: 'ok' }));
    // standardwebhooks refuses stale timestamps: this test runs on the real clock.
    const at = new Date();
    const measured: string[] = [];
    const metrics = { ...noMetrics, webhookAttempt: (outcome: string) => measured.push(outcome) };
    dispatcher(t, { queue, sender, now: () => at, metrics });
    await queue.waitFinished(1);
    const [{ record, next }] = queue.finished as [Finished];
    assert.deepEqual(next, { kind: 'delivered' });
    assert.deepEqual(measured, ['delivered']);
    assert.deepEqual(record, {
      at,
      durationMs: 3,
      httpStatus: 204,
      error: null,
      responseExcerpt: 'ok',
    });
    const [sent] = sender.sent as [OutboundMessage];
    assert.equal(sent.timestamp, Math.floor(at.getTime() / 1000));
    assert.equal(sent.signature.split(' ').length, 2);
    const headers = {
      'webhook-id': sent.messageId,
      'webhook-timestamp': String(sent.timestamp),
      'webhook-signature': sent.signature,
    };
    for (const secret of [SECRET, previous]) {
      assert.deepEqual(new Webhook(secret).verify(sent.body, headers), { id: 1, name: 'Fern' });
    }
  });

  const cases: [string, () => Promise<Partial<SendOutcome>>, number, NextStep][] = [
    [
      'a 500 is tried again after the first delay',
      status(500),
      1,
      { kind: 'retry', at: new Date(NOW.getTime() + 5000) },
    ],
    [
      'a redirect is a failure',
      status(302),
      1,
      { kind: 'retry', at: new Date(NOW.getTime() + 5000) },
    ],
    [
      'no answer is a failure',
      status(0, { status: null, error: 'ECONNREFUSED' }),
      1,
      { kind: 'retry', at: new Date(NOW.getTime() + 5000) },
    ],
    [
      'Retry-After on 503 lengthens the delay',
      status(503, { retryAfterMs: 60_000 }),
      1,
      { kind: 'retry', at: new Date(NOW.getTime() + 60_000) },
    ],
    ['410 disables the endpoint', status(410), 1, { kind: 'gone' }],
  ];
  for (const [name, answer, , expected] of cases) {
    it(name, async (t) => {
      const queue = new MemoryQueue();
      queue.add(1);
      dispatcher(t, { queue, sender: new ScriptedSender(answer) });
      await queue.waitFinished(1);
      assert.deepEqual(queue.finished[0]!.next, expected);
    });
  }

  it('fails a message for good after the last attempt of the schedule', async (t) => {
    const queue = new MemoryQueue();
    queue.add(1);
    const claim = queue.claim.bind(queue);
    queue.claim = async (...args) => (await claim(...args)).map((m) => ({ ...m, attempt: 3 }));
    dispatcher(t, { queue, sender: new ScriptedSender(status(500)), schedule: [1000, 2000] });
    await queue.waitFinished(1);
    assert.deepEqual(queue.finished[0]!.next, { kind: 'failed' });
  });

  it(
    'wakes when the queue says messages were written, not only on its poll',
    { timeout: 10_000 },
    async (t) => {
      const queue = new MemoryQueue();
      const sender = new ScriptedSender(status(200));
      dispatcher(t, { queue, sender, pollMs: 600_000 });
      queue.add(2);
      await queue.waitFinished(2);
      assert.equal(sender.sent.length, 2);
    },
  );

  it('bounds the attempts in flight per endpoint and per process', async (t) => {
    const queue = new MemoryQueue();
    for (let i = 0; i < 40; i++) for (const endpoint of [1n, 2n, 3n]) queue.add(1, endpoint);
    const most = new Map<string, number>();
    const now = new Map<string, number>();
    const sender = new ScriptedSender(async ({ url }) => {
      now.set(url, (now.get(url) ?? 0) + 1);
      most.set(url, Math.max(most.get(url) ?? 0, now.get(url)!));
      await new Promise((resolve) => setTimeout(resolve, 1));
      now.set(url, now.get(url)! - 1);
      return { status: 200 };
    });
    dispatcher(t, { queue, sender, perEndpoint: 4, maxInFlight: 10 });
    await queue.waitFinished(120);
    // Windows grow from 1 with deliveries, up to 4 each; three of 4 would be 12 slots, more
    // than the process's 10.
    assert.ok(
      [...most.values()].every((n) => n <= 4),
      `per endpoint: ${[...most.values()]}`,
    );
    assert.ok(Math.max(...most.values()) > 1, 'windows grow with deliveries');
    assert.ok(sender.maxInFlight <= 10, `in flight: ${sender.maxInFlight}`);
  });

  it('begins no more attempts than its budget allows, and the rest once it has room', async (t) => {
    const queue = new MemoryQueue();
    for (const endpoint of [1n, 2n, 3n, 4n, 5n, 6n]) queue.add(1, endpoint);
    const sender = new ScriptedSender(status(204));
    let room = 3;
    let retry: (() => void) | undefined;
    const budget = {
      take: () => room-- > 0,
      room: () => room > 0,
      later: (callback: () => void) => (retry = callback),
      cancel: () => (retry = undefined),
    };
    dispatcher(t, { queue, sender, budget });
    await queue.waitFinished(3);
    assert.equal(sender.sent.length, 3, 'one attempt an endpoint, but only three begun');
    assert.ok(retry !== undefined, 'asked to be called back');
    room = 10;
    retry();
    await queue.waitFinished(6);
    assert.equal(sender.sent.length, 6);
  });

  // A dispatcher that never asks would leave this waiting: the timeout fails it.
  it('claims nothing while its budget has no room', { timeout: 5000 }, async (t) => {
    const queue = new MemoryQueue();
    queue.add(3);
    const sender = new ScriptedSender(status(204));
    const looked = new EventEmitter();
    let open = false;
    let looks = 0;
    const budget = {
      take: () => open,
      room: () => {
        looked.emit('look', ++looks);
        return open;
      },
      later: () => undefined,
      cancel: () => undefined,
    };
    dispatcher(t, { queue, sender, budget });
    while (looks < 2) await once(looked, 'look');
    assert.deepEqual(
      queue.calls.filter((call) => call.startsWith('claim')),
      [],
      'no claim while out of budget',
    );
    open = true;
    await queue.waitFinished(3);
    assert.ok(queue.calls.includes('claim 128'));
  });

  it('gives a hung endpoint one attempt in flight; the others are sent meanwhile', async (t) => {
    const queue = new MemoryQueue();
    const healthy = 100n;
    for (let endpoint = 1n; endpoint <= 20n; endpoint++) queue.add(50, endpoint);
    const sender = new ScriptedSender(({ url }, signal) =>
      url.endsWith(`/${healthy}`)
        ? Promise.resolve({ status: 204 })
        : new Promise((resolve) =>
            signal!.addEventListener('abort', () => resolve({ abandoned: true })),
          ),
    );
    // Fewer slots than hung endpoints: each still gets its one attempt, and so does the
    // healthy one, whose messages come after every hung one's.
    dispatcher(t, { queue, sender, perEndpoint: 16, maxInFlight: 8 });
    while (sender.inFlight < 20) await once(sender, 'sent');
    queue.add(10, healthy);
    await queue.waitFinished(10);
    assert.deepEqual(
      queue.finished.map((f) => f.message.endpoint.id),
      Array.from({ length: 10 }, () => healthy),
    );
    assert.equal(sender.sent.length, 30, 'one attempt at each hung endpoint, no more');
    assert.equal(sender.inFlight, 20);
  });

  /**
   * A started dispatcher on mocked timers (1 s poll and timeout) over `queue`: `claims` counts
   * its claims, `settle` lets it run what it can without a timer firing.
   */
  function onMockedTimers(
    t: TestContext,
    queue: MemoryQueue,
    sender: ScriptedSender,
    now: () => Date = () => NOW,
    random: () => number = Math.random,
  ) {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const made = new WebhookDispatcher({
      queue,
      sender,
      log: silentLog,
      timeoutMs: 1000,
      now,
      random,
      pollMs: 1000,
    });
    made.start();
    t.after(async () => {
      t.mock.timers.reset();
      await made.stop(0);
    });
    return {
      claims: () => queue.calls.filter((call) => call.startsWith('claim')).length,
      settle: async () => {
        for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
      },
    };
  }

  const answering = () => new ScriptedSender(() => Promise.resolve({ status: 204 }));

  it("leaves a hung receiver's due backlog alone until its poll", async (t) => {
    const queue = new MemoryQueue();
    queue.add(10, 1n);
    // What the stores answer while a receiver hangs: its backlog was due by the claim (and
    // is left out), its one attempt's lease ends after the poll.
    queue.nextDue = async (after) => new Date(after.getTime() + 6000);
    const hung = new ScriptedSender(
      (_message, signal) =>
        new Promise((resolve) =>
          signal!.addEventListener('abort', () => resolve({ abandoned: true })),
        ),
    );
    const { claims, settle } = onMockedTimers(t, queue, hung);
    await settle();
    assert.equal(hung.inFlight, 1);
    const first = claims();
    for (let ms = 0; ms < 950; ms += 50) {
      t.mock.timers.tick(50);
      await settle();
    }
    assert.equal(claims(), first, 'no claim in the poll period');
    t.mock.timers.tick(50);
    await settle();
    assert.equal(claims(), first + 1, 'one claim at the poll');
    assert.equal(hung.sent.length, 1);
  });

  it('claims again when the next message falls due after a claim, not at the poll', async (t) => {
    const queue = new MemoryQueue();
    // Another endpoint's retry, 300 ms after the claim, past a backlog held back by its share.
    queue.nextDue = async (after) => new Date(after.getTime() + 300);
    const { claims, settle } = onMockedTimers(t, queue, answering());
    await settle();
    const first = claims();
    t.mock.timers.tick(299);
    await settle();
    assert.equal(claims(), first, 'not before it is due');
    t.mock.timers.tick(1);
    await settle();
    assert.equal(claims(), first + 1, 'when it is due');
  });

  it('wakes for nothing at most 4 times a second: messages falling due it cannot take', async (t) => {
    const queue = new MemoryQueue();
    // A disabled endpoint's retries, or a hung one's, falling due every 10 ms: none claimable.
    let clock = NOW.getTime();
    queue.nextDue = async (after) => new Date(after.getTime() + 10);
    const { claims, settle } = onMockedTimers(t, queue, answering(), () => new Date(clock));
    await settle();
    const first = claims();
    for (let ms = 0; ms < 1000; ms += 10) {
      clock += 10;
      t.mock.timers.tick(10);
      await settle();
    }
    assert.equal(claims() - first, 4, 'one claim every 250 ms');
  });

  it('pauses an endpoint whose attempts fail at once; the others go meanwhile', async (t) => {
    // A receiver that refuses every connection fails as fast as attempts are recorded: without
    // a pause, its whole backlog would be tried at once, and again at each retry.
    const queue = new MemoryQueue();
    queue.add(20, 1n);
    let clock = NOW.getTime();
    const sender = new ScriptedSender(({ url }) =>
      Promise.resolve(
        url.endsWith('/1') ? { status: null, error: 'connect ECONNREFUSED' } : { status: 204 },
      ),
    );
    const { settle } = onMockedTimers(
      t,
      queue,
      sender,
      () => new Date(clock),
      () => 0,
    );
    const refused = () => sender.sent.filter(({ url }) => url.endsWith('/1')).length;
    const wait = async (ms: number) => {
      for (let left = ms; left > 0; left -= 10) {
        clock += 10;
        t.mock.timers.tick(10);
        await settle();
      }
    };
    await settle();
    assert.equal(refused(), 1, 'one attempt, then a pause');
    for (const pause of [250, 500, 1000, 2000]) {
      await wait(pause - 10);
      assert.equal(refused(), 1 + [250, 500, 1000, 2000].indexOf(pause), `not within ${pause} ms`);
      queue.add(1, 2n);
      await settle();
      assert.equal(sender.sent.at(-1)!.url, 'http://hooks.test/2', 'another endpoint meanwhile');
      await wait(10);
      assert.equal(refused(), 2 + [250, 500, 1000, 2000].indexOf(pause), `after ${pause} ms`);
    }
  });

  it('abandons attempts still running after the grace period when stopped', async (t) => {
    const queue = new MemoryQueue();
    queue.add(1);
    const sender = new ScriptedSender(
      (_m, signal) =>
        new Promise((resolve) =>
          signal!.addEventListener('abort', () => resolve({ abandoned: true })),
        ),
    );
    const running = dispatcher(t, { queue, sender });
    await once(sender, 'sent');
    await running.stop(10);
    assert.equal(queue.finished.length, 0);
    // Given back free, so that another process sends it now rather than after the lease.
    assert.deepEqual(queue.released, [{ id: 1n, kept: false }]);
  });

  it('gives back, unattempted, a message whose lease is too short', async (t) => {
    const queue = new MemoryQueue();
    queue.add(1);
    const sender = new ScriptedSender(status(200));
    const claim = queue.claim.bind(queue);
    queue.claim = (now, _lease, limit) => claim(now, 500, limit);
    const running = dispatcher(t, { queue, sender });
    await once(queue, 'released');
    await running.stop(100);
    assert.equal(sender.sent.length, 0);
    assert.deepEqual(queue.released[0], { id: 1n, kept: false });
  });

  it('purges past retention and disables failing endpoints', async (t) => {
    const queue = new MemoryQueue();
    const sender = new ScriptedSender(status(200));
    const logged: string[] = [];
    const log: Log = { ...silentLog, error: (_f, m) => logged.push(m) };
    queue.add(1);
    dispatcher(t, { queue, sender, log, retentionMs: 86_400_000, disableAfterMs: 3_600_000 });
    await queue.waitFinished(1);
    assert.ok(queue.calls.includes('purge 2023-12-31T00:00:00.000Z'));
    assert.ok(queue.calls.includes('disable 2023-12-31T23:00:00.000Z'));
    assert.deepEqual(logged, []);
  });

  it('logs a failed claim and goes on', async (t) => {
    const queue = new MemoryQueue();
    const logged: string[] = [];
    const log: Log = { ...silentLog, error: (_f, m) => logged.push(m) };
    const claim = queue.claim.bind(queue);
    let fail = true;
    queue.claim = async (...args) => {
      if (fail) {
        fail = false;
        throw new Error('database down');
      }
      return await claim(...args);
    };
    queue.add(1);
    dispatcher(t, { queue, sender: new ScriptedSender(status(200)), log, pollMs: 5 });
    await queue.waitFinished(1);
    assert.deepEqual(logged, ['claiming webhook messages failed; will retry']);
  });
});
