import assert from 'node:assert/strict';
import { once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { AddressPolicy, parseNetworks } from '../../src/core/webhooks/address-policy.js';
import type { OutboundMessage } from '../../src/core/webhooks/delivery.js';
import { newSecret, signatureHeader } from '../../src/core/webhooks/signature.js';
import { destinationCheck, type Resolve } from '../../src/outbound/destination.js';
import {
  HttpWebhookSender,
  IDLE_SOCKETS_PER_HOST,
  type SenderOptions,
} from '../../src/outbound/webhook-sender.js';

// The sender against real receivers on loopback: what goes on the wire, what an answer
// comes to, and the address policy at connect time (a rebinding name included).

interface Received {
  headers: IncomingMessage['headers'];
  body: string;
  url: string;
}

async function receiver(
  t: TestContext,
  answer: (request: IncomingMessage, response: ServerResponse) => void,
) {
  const received: Received[] = [];
  const server = http.createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      received.push({ headers: request.headers, body, url: request.url ?? '' });
      answer(request, response);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  return { received, port, server, url: `http://127.0.0.1:${port}/hook` };
}

const LOOPBACK = new AddressPolicy(parseNetworks('127.0.0.0/8,::1/128'));

function sender(t: TestContext, options: Partial<SenderOptions> = {}) {
  const made = new HttpWebhookSender({
    policy: LOOPBACK,
    timeoutMs: 5000,
    userAgent: 'plantstore/9.9.9',
    ...options,
  });
  t.after(() => made.close());
  return made;
}

const SECRET = newSecret();
const BODY = '{"id":9223372036854775807,"name":"Fern","tag":"green"}';

function message(url: string, timestamp = Math.floor(Date.now() / 1000)): OutboundMessage {
  return {
    url,
    messageId: 'msg_2b8ZmXvQ',
    eventType: 'plant.created',
    timestamp,
    signature: signatureHeader([SECRET], 'msg_2b8ZmXvQ', timestamp, BODY),
    body: BODY,
  };
}

describe('HttpWebhookSender', () => {
  it('posts the exact body with the Standard Webhooks headers', async (t) => {
    const hook = await receiver(t, (_q, response) => response.end('thanks'));
    const outcome = await sender(t).send(message(hook.url));
    assert.equal(outcome.status, 200);
    assert.equal(outcome.error, null);
    assert.equal(outcome.excerpt, 'thanks');
    assert.ok(outcome.durationMs >= 0);
    const [got] = hook.received;
    assert.equal(got!.body, BODY);
    assert.equal(got!.headers['content-type'], 'application/json');
    assert.equal(got!.headers['user-agent'], 'plantstore/9.9.9');
    assert.equal(got!.headers['webhook-event-type'], 'plant.created');
    assert.equal(got!.headers['webhook-id'], 'msg_2b8ZmXvQ');
    const verified = new Webhook(SECRET).verify(got!.body, {
      'webhook-id': String(got!.headers['webhook-id']),
      'webhook-timestamp': String(got!.headers['webhook-timestamp']),
      'webhook-signature': String(got!.headers['webhook-signature']),
    }) as { name: string };
    assert.equal(verified.name, 'Fern');
  });

  it('keeps the first 1 KiB of an answer and its status', async (t) => {
    const hook = await receiver(t, (_q, response) => {
      response.statusCode = 500;
      response.end('x'.repeat(5000));
    });
    const outcome = await sender(t).send(message(hook.url));
    assert.equal(outcome.status, 500);
    assert.equal(outcome.excerpt, 'x'.repeat(1024));
  });

  it('reads Retry-After on 503 and 429, in seconds or as a date', async (t) => {
    const answers = [
      [503, '120'],
      [429, new Date(Date.now() + 3_600_000).toUTCString()],
      [500, '120'],
    ] as const;
    let i = 0;
    const hook = await receiver(t, (_q, response) => {
      const [status, after] = answers[i++]!;
      response.writeHead(status, { 'retry-after': after }).end();
    });
    const send = sender(t);
    assert.equal((await send.send(message(hook.url))).retryAfterMs, 120_000);
    const dated = (await send.send(message(hook.url))).retryAfterMs!;
    assert.ok(dated > 3_590_000 && dated <= 3_600_000, String(dated));
    assert.equal((await send.send(message(hook.url))).retryAfterMs, null);
  });

  it('never follows a redirect', async (t) => {
    const hook = await receiver(t, (request, response) => {
      response.writeHead(307, { location: '/elsewhere' }).end();
    });
    const outcome = await sender(t).send(message(hook.url));
    assert.equal(outcome.status, 307);
    assert.equal(outcome.error, 'redirect to /elsewhere not followed');
    assert.deepEqual(
      hook.received.map((r) => r.url),
      ['/hook'],
    );
  });

  it('gives up on a receiver that does not answer in time', async (t) => {
    const hook = await receiver(t, () => undefined);
    const outcome = await sender(t, { timeoutMs: 150 }).send(message(hook.url));
    assert.equal(outcome.status, null);
    assert.equal(outcome.error, 'timed out after 150 ms');
    assert.equal(hook.received.length, 1);
  });

  it('keeps the status of an answer whose body never ends', async (t) => {
    const hook = await receiver(t, (_q, response) => {
      response.writeHead(200);
      response.write('partial');
    });
    const outcome = await sender(t, { timeoutMs: 150 }).send(message(hook.url));
    assert.equal(outcome.status, 200);
    assert.equal(outcome.excerpt, 'partial');
  });

  it(
    'sends attempts to one host side by side, and keeps 256 connections',
    { timeout: 20_000 },
    async (t) => {
      // Endpoints often share a host (a relay's paths): attempts there must not queue behind
      // each other's, so each gets a connection of its own; idle ones beyond 256 are closed.
      const ATTEMPTS = IDLE_SOCKETS_PER_HOST + 24;
      const held: ServerResponse[] = [];
      let hold = true;
      let allHeld: () => void = () => undefined;
      const hook = await receiver(t, (_q, response) => {
        if (!hold) return void response.writeHead(204).end();
        held.push(response);
        if (held.length === ATTEMPTS) allHeld();
      });
      const connections = new Set<Socket>();
      hook.server.on('connection', (socket: Socket) => {
        connections.add(socket);
        socket.on('close', () => connections.delete(socket));
      });
      const made = sender(t, { timeoutMs: 10_000 });
      const send = (count: number) =>
        Promise.all(
          Array.from({ length: count }, (_, i) => made.send(message(`${hook.url}/${i}`))),
        );

      const sent = send(ATTEMPTS);
      await new Promise<void>((resolve) => (allHeld = resolve));
      assert.equal(connections.size, ATTEMPTS);
      let idle: () => void = () => undefined;
      const closed = new Promise<void>((resolve) => (idle = resolve));
      for (const socket of connections) {
        socket.on('close', () => {
          if (connections.size === IDLE_SOCKETS_PER_HOST) idle();
        });
      }
      hold = false;
      for (const response of held) response.writeHead(204).end();
      for (const outcome of await sent) assert.equal(outcome.status, 204);
      await closed;

      // Those kept are used again: as many attempts more open no connection.
      const kept = [...connections];
      for (const outcome of await send(IDLE_SOCKETS_PER_HOST)) assert.equal(outcome.status, 204);
      assert.deepEqual([...connections], kept);
    },
  );

  // Within 10 s, when the receiver would keep the connection a minute.
  it(
    'closes a connection left unused for its idle time, and opens another after',
    { timeout: 10_000 },
    async (t) => {
      const hook = await receiver(t, (_q, response) => void response.writeHead(204).end());
      // The receiver would keep it open a minute: a close sooner is the sender's.
      hook.server.keepAliveTimeout = 60_000;
      const opened: Socket[] = [];
      hook.server.on('connection', (socket: Socket) => opened.push(socket));
      const made = sender(t, { idleMs: 50 });
      assert.equal((await made.send(message(hook.url))).status, 204);
      assert.equal(opened.length, 1);
      await once(opened[0]!, 'close');
      assert.equal((await made.send(message(hook.url))).status, 204);
      assert.equal(opened.length, 2);
    },
  );

  it('records a refused connection', async (t) => {
    const hook = await receiver(t, () => undefined);
    const closed = http.createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address() as AddressInfo;
    closed.close();
    await once(closed, 'close');
    const outcome = await sender(t).send(
      message(hook.url.replace(String(hook.port), String(port))),
    );
    assert.equal(outcome.status, null);
    assert.match(outcome.error!, /ECONNREFUSED/);
  });

  it('abandons an attempt when told to stop', async (t) => {
    const hook = await receiver(t, () => undefined);
    const stop = new AbortController();
    const sending = sender(t).send(message(hook.url), stop.signal);
    await waitFor(() => hook.received.length === 1);
    stop.abort();
    const outcome = await sending;
    assert.equal(outcome.abandoned, true);
  });
});

describe('the address policy at connect time', () => {
  const resolveTo =
    (...answers: string[][]): Resolve =>
    async () => {
      const addresses = answers.length > 1 ? answers.shift()! : answers[0]!;
      return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    };

  for (const literal of [
    '127.0.0.1',
    '[::1]',
    '[::ffff:127.0.0.1]',
    '10.0.0.1',
    '169.254.169.254',
  ]) {
    it(`refuses the literal ${literal} unless allowed`, async (t) => {
      const outcome = await sender(t, { policy: new AddressPolicy() }).send(
        message(`http://${literal}:9/hook`),
      );
      assert.equal(outcome.status, null);
      assert.match(outcome.error!, /^unsafe destination: .* is not a public address/);
    });
  }

  it('refuses a name that rebinds to loopback after passing the subscription check', async (t) => {
    const hook = await receiver(t, (_q, response) => response.end());
    const resolve = resolveTo(['93.184.215.14'], ['127.0.0.1']);
    const policy = new AddressPolicy();
    const url = `http://rebind.test:${hook.port}/hook`;
    assert.deepEqual(await destinationCheck(policy, resolve)(url), { ok: true });
    const outcome = await sender(t, { policy, resolve }).send(message(url));
    assert.equal(outcome.status, null);
    assert.equal(
      outcome.error,
      'unsafe destination: rebind.test (127.0.0.1) is not a public address (loopback); see --webhook-allow-networks',
    );
    assert.equal(hook.received.length, 0);
  });

  it('refuses a name with any private address among public ones', async (t) => {
    const resolve = resolveTo(['93.184.215.14', '10.0.0.7']);
    const check = destinationCheck(new AddressPolicy(), resolve);
    const verdict = await check('https://mixed.test/hook');
    assert.equal(verdict.ok, false);
    assert.match((verdict as { reason: string }).reason, /10\.0\.0\.7\) is not a public .*private/);
    const outcome = await sender(t, { policy: new AddressPolicy(), resolve }).send(
      message('http://mixed.test/hook'),
    );
    assert.match(outcome.error!, /unsafe destination/);
  });

  it('connects to a name in an allowed network', async (t) => {
    const hook = await receiver(t, (_q, response) => response.end());
    const resolve = resolveTo(['127.0.0.1']);
    const outcome = await sender(t, { resolve }).send(message(`http://near.test:${hook.port}/`));
    assert.equal(outcome.status, 200);
    assert.equal(hook.received.length, 1);
  });

  it('refuses other schemes, credentials and unresolvable names at subscription', async () => {
    const check = destinationCheck(new AddressPolicy(), async () => {
      throw Object.assign(new Error(''), { code: 'ENOTFOUND' });
    });
    const reasons = await Promise.all(
      ['ftp://a.test/', 'https://user:pw@a.test/', 'not a url', 'https://gone.test/'].map(
        async (url) => ((await check(url)) as { reason: string }).reason,
      ),
    );
    assert.deepEqual(reasons, [
      'the webhook URL must be http or https',
      'the webhook URL may not carry credentials (user:password@)',
      'the webhook URL is not an absolute URL',
      "the webhook URL's host does not resolve (ENOTFOUND)",
    ]);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}
