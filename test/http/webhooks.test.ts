import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { test, type TestContext } from 'node:test';
import { INT64_MAX } from '../../src/core/int64.js';
import { AddressPolicy } from '../../src/core/webhooks/address-policy.js';
import { destinationCheck } from '../../src/outbound/destination.js';
import { fanOutAll } from '../helpers/fan-out.js';
import { body, forEachBackend, type Setup, setup, type TestApp } from '../helpers/setup.js';

// Names the test resolver knows: one public, one into the private network.
const NAMES: Record<string, LookupAddress[]> = {
  'hooks.example.com': [{ address: '93.184.215.14', family: 4 }],
  'intranet.example.com': [{ address: '10.1.2.3', family: 4 }],
  'mixed.example.com': [
    { address: '93.184.215.14', family: 4 },
    { address: 'fd00::7', family: 6 },
  ],
};

const resolve = async (host: string) => {
  const found = NAMES[host];
  if (found === undefined)
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return found;
};

interface Endpoint {
  id: bigint;
  url: string;
  events: string[];
  description?: string;
  enabled: boolean;
  disabledReason?: string;
  createdAt: string;
  updatedAt: string;
  secret?: string;
}

async function webhookApp(setup: Setup, t: TestContext) {
  const app = await setup(t, {
    webhookDestinations: destinationCheck(new AddressPolicy(), resolve),
  });
  const token = await app.newToken([
    'plants:read',
    'plants:write',
    'webhooks:read',
    'webhooks:write',
  ]);
  return { ...app, token };
}

const subscribe = (app: TestApp, token: string, payload: object) =>
  app.call({ method: 'POST', url: '/webhooks', token, json: JSON.stringify(payload) });

// Everything that writes, on each backend; the served document on one.
forEachBackend(({ setup }) => {
  test('an endpoint is created with its secret shown once, then read, listed, patched, deleted', async (t) => {
    const app = await webhookApp(setup, t);
    const { token } = app;
    const created = await subscribe(app, token, {
      url: 'https://hooks.example.com/in',
      description: 'crm',
    });
    assert.equal(created.statusCode, 201, created.body);
    const endpoint = body<Endpoint>(created);
    assert.equal(created.headers.location, `/webhooks/${endpoint.id}`);
    assert.match(endpoint.secret!, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(endpoint.secret!.slice(6), 'base64').length, 32);
    assert.deepEqual(endpoint.events, ['plant.created']);
    assert.equal(endpoint.enabled, true);
    assert.equal(typeof endpoint.id, 'bigint');

    const read = await app.call({ method: 'GET', url: `/webhooks/${endpoint.id}`, token });
    assert.equal(read.statusCode, 200);
    const { secret, ...shown } = endpoint;
    assert.ok(secret);
    assert.deepEqual(body(read), shown, 'the same endpoint, without its secret');
    assert.doesNotMatch(read.body, /whsec_/);

    const second = body<Endpoint>(
      await subscribe(app, token, {
        url: 'http://hooks.example.com/2',
        events: ['plant.updated', 'plant.deleted'],
      }),
    );
    const page = await app.call({ method: 'GET', url: '/webhooks?limit=1', token });
    assert.deepEqual(
      body<Endpoint[]>(page).map((e) => e.id),
      [endpoint.id],
    );
    assert.equal(page.headers.link, `</webhooks?limit=1&after=${endpoint.id}>; rel="next"`);
    const rest = await app.call({
      method: 'GET',
      url: `/webhooks?limit=1&after=${endpoint.id}`,
      token,
    });
    assert.deepEqual(
      body<Endpoint[]>(rest).map((e) => e.id),
      [second.id],
    );
    assert.equal(rest.headers.link, undefined);

    const patched = await app.call({
      method: 'PATCH',
      url: `/webhooks/${endpoint.id}`,
      token,
      headers: { 'content-type': 'application/merge-patch+json' },
      payload: JSON.stringify({ description: null, enabled: false, events: ['plant.deleted'] }),
    });
    assert.equal(patched.statusCode, 200, patched.body);
    const after = body<Endpoint>(patched);
    assert.equal(after.description, undefined);
    assert.equal(after.enabled, false);
    assert.equal(after.disabledReason, 'request');
    assert.deepEqual(after.events, ['plant.deleted']);
    assert.equal(after.url, endpoint.url);
    const patch = async (change: object) => {
      const res = await app.call({
        method: 'PATCH',
        url: `/webhooks/${endpoint.id}`,
        token,
        headers: { 'content-type': 'application/merge-patch+json' },
        payload: JSON.stringify(change),
      });
      assert.equal(res.statusCode, 200, res.body);
      return body<Endpoint>(res);
    };
    assert.equal((await patch({ description: 'still off' })).disabledReason, 'request');
    const enabled = await patch({ enabled: true });
    assert.equal(enabled.enabled, true);
    assert.equal(enabled.disabledReason, undefined, 'only while disabled');
    assert.equal((await patch({ enabled: false })).disabledReason, 'request');

    assert.equal(
      (await app.call({ method: 'DELETE', url: `/webhooks/${endpoint.id}`, token })).statusCode,
      204,
    );
    const gone = await app.call({ method: 'GET', url: `/webhooks/${endpoint.id}`, token });
    assert.equal(gone.statusCode, 404);
    assert.equal(body<{ error: bigint }>(gone).error, 40403n);
    const malformed = await app.call({ method: 'GET', url: '/webhooks/01', token });
    assert.equal(malformed.statusCode, 400);
    assert.equal(body<{ error: bigint }>(malformed).error, 40010n);
  });

  test('webhook operations need the webhook scopes; plant tokens are refused', async (t) => {
    const app = await webhookApp(setup, t);
    const plantsOnly = await app.newToken();
    const reader = await app.newToken(['webhooks:read']);
    const refused = await subscribe(app, plantsOnly, { url: 'https://hooks.example.com/' });
    assert.equal(refused.statusCode, 403);
    assert.equal(
      (await subscribe(app, reader, { url: 'https://hooks.example.com/' })).statusCode,
      403,
    );
    assert.equal(
      (await app.call({ method: 'GET', url: '/webhooks', token: reader })).statusCode,
      200,
    );
    assert.equal(
      (await app.call({ method: 'GET', url: '/webhooks', token: plantsOnly })).statusCode,
      403,
    );
  });

  test('a URL to a non-public address, or not http(s), or with credentials, is refused with 40011', async (t) => {
    const app = await webhookApp(setup, t);
    const refused = [
      'http://127.0.0.1/',
      'http://[::1]/',
      'http://10.0.0.1/',
      'http://172.16.5.4/',
      'http://192.168.1.1/',
      'http://169.254.169.254/latest/meta-data',
      'http://100.64.0.1/',
      'http://[fd12::1]/',
      'http://[fe80::1]/',
      'http://224.0.0.1/',
      'http://0.0.0.0/',
      'http://[::]/',
      'http://192.0.2.10/',
      'http://198.51.100.1/',
      'http://[2001:db8::1]/',
      'http://240.0.0.1/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:a00:1]/',
      'https://intranet.example.com/',
      'https://mixed.example.com/',
      'ftp://hooks.example.com/',
      'file:///etc/passwd',
      'https://user:pass@hooks.example.com/',
      'not a url',
    ];
    for (const url of refused) {
      const res = await subscribe(app, app.token, { url });
      assert.equal(res.statusCode, 400, url);
      assert.equal(body<{ error: bigint }>(res).error, 40011n, url);
    }
    const listed = await app.call({ method: 'GET', url: '/webhooks', token: app.token });
    assert.deepEqual(body(listed), [], 'nothing was created');
    const ok = body<Endpoint>(
      await subscribe(app, app.token, { url: 'https://hooks.example.com/' }),
    );
    const moved = await app.call({
      method: 'PATCH',
      url: `/webhooks/${ok.id}`,
      token: app.token,
      json: JSON.stringify({ url: 'http://169.254.169.254/' }),
    });
    assert.equal(moved.statusCode, 400, 'a patched URL is checked too');
    assert.equal(body<{ error: bigint }>(moved).error, 40011n);
  });

  test('a URL naming port 0 is refused with 40011, when subscribing and when patching', async (t) => {
    const app = await webhookApp(setup, t);
    const message = 'The webhook URL is refused: the webhook URL may not name port 0.';
    for (const url of ['http://8.8.8.8:0/', 'https://hooks.example.com:00/in']) {
      const res = await subscribe(app, app.token, { url });
      assert.equal(res.statusCode, 400, url);
      assert.deepEqual(body(res), { error: 40011n, message }, url);
    }
    const ok = body<Endpoint>(await subscribe(app, app.token, { url: 'http://8.8.8.8:1/' }));
    const moved = await app.call({
      method: 'PATCH',
      url: `/webhooks/${ok.id}`,
      token: app.token,
      json: JSON.stringify({ url: 'http://8.8.8.8:0/' }),
    });
    assert.equal(moved.statusCode, 400);
    assert.deepEqual(body(moved), { error: 40011n, message });
    const kept = await app.call({ method: 'GET', url: `/webhooks/${ok.id}`, token: app.token });
    assert.equal(
      body<Endpoint>(kept).url,
      'http://8.8.8.8:1/',
      'the refused patch changed nothing',
    );
  });

  test('deliveries: each plant change is a message with an exact id; filter, page, retry', async (t) => {
    const app = await webhookApp(setup, t);
    const { token } = app;
    const endpoint = body<Endpoint>(
      await subscribe(app, token, {
        url: 'https://hooks.example.com/',
        events: ['plant.created', 'plant.updated', 'plant.deleted'],
      }),
    );
    const plants = app.newToken();
    const plantToken = await plants;
    const id = INT64_MAX;
    const create = await app.call({
      method: 'POST',
      url: '/plants',
      token: plantToken,
      json: `{"id":${id},"name":"Fern","tag":"green"}`,
    });
    assert.equal(create.statusCode, 201);
    await app.call({
      method: 'PATCH',
      url: `/plants/${id}`,
      token: plantToken,
      json: '{"tag":null}',
    });
    await app.call({ method: 'DELETE', url: `/plants/${id}`, token: plantToken });
    // What the fan-out of a `serve` process does within milliseconds (composeApp runs none).
    assert.equal(await fanOutAll(app.store), 3);

    const url = `/webhooks/${endpoint.id}/deliveries`;
    const list = await app.call({ method: 'GET', url, token });
    assert.equal(list.statusCode, 200, list.body);
    assert.match(list.body, /"payload":\{"id":9223372036854775807,"name":"Fern","tag":"green"\}/);
    const deliveries = body<
      {
        id: bigint;
        webhookId: string;
        eventType: string;
        status: string;
        payload: unknown;
        nextAttemptAt?: string;
        attempts: unknown[];
      }[]
    >(list);
    assert.deepEqual(
      deliveries.map((d) => [d.eventType, d.status, d.payload]),
      [
        ['plant.deleted', 'pending', { id, name: 'Fern' }],
        ['plant.updated', 'pending', { id, name: 'Fern' }],
        ['plant.created', 'pending', { id, name: 'Fern', tag: 'green' }],
      ],
    );
    for (const d of deliveries) {
      assert.match(d.webhookId, /^msg_[0-9a-f]{32}$/);
      assert.ok(d.nextAttemptAt);
      assert.deepEqual(d.attempts, []);
    }
    const first = await app.call({ method: 'GET', url: `${url}?limit=2`, token });
    assert.equal(first.headers.link, `<${url}?limit=2&after=${deliveries[1]!.id}>; rel="next"`);
    const filtered = await app.call({ method: 'GET', url: `${url}?status=delivered`, token });
    assert.deepEqual(body(filtered), []);
    const bad = await app.call({ method: 'GET', url: `${url}?status=lost`, token });
    assert.equal(body<{ error: bigint }>(bad).error, 40002n);

    let woken = 0;
    app.store.webhookQueue.onMessages(() => (woken += 1));
    const retry = await app.call({
      method: 'POST',
      url: `${url}/${deliveries[2]!.id}/retry`,
      token,
    });
    assert.equal(retry.statusCode, 202, retry.body);
    assert.equal(woken, 1, 'the retry wakes the dispatcher');
    const missing = await app.call({ method: 'POST', url: `${url}/999/retry`, token });
    assert.equal(body<{ error: bigint }>(missing).error, 40404n);
    const noEndpoint = await app.call({ method: 'GET', url: '/webhooks/999/deliveries', token });
    assert.equal(body<{ error: bigint }>(noEndpoint).error, 40403n);
  });

  test('webhook ids sort in the order of their changes: the time first, then random', async (t) => {
    const app = await webhookApp(setup, t);
    const { token } = app;
    const endpoint = body<Endpoint>(
      await subscribe(app, token, { url: 'https://hooks.example.com/', events: ['plant.created'] }),
    );
    const plantToken = await app.newToken();
    for (let i = 0; i < 8; i++) {
      // Each create in a millisecond of its own: ids of one millisecond differ by chance only.
      const before = Date.now();
      while (Date.now() === before);
      const created = await app.call({
        method: 'POST',
        url: '/plants',
        token: plantToken,
        json: `{"name":"plant ${i}"}`,
      });
      assert.equal(created.statusCode, 201);
    }
    assert.equal(await fanOutAll(app.store), 8);
    const listed = await app.call({
      method: 'GET',
      url: `/webhooks/${endpoint.id}/deliveries`,
      token,
    });
    const deliveries = body<{ webhookId: string; createdAt: string }[]>(listed).reverse();
    assert.equal(deliveries.length, 8);
    for (const [i, d] of deliveries.entries()) {
      assert.match(d.webhookId, /^msg_[0-9a-f]{32}$/);
      // A new id goes at the end of the UNIQUE index, not onto a random page of it.
      assert.equal(parseInt(d.webhookId.slice(4, 16), 16), Date.parse(d.createdAt));
      if (i > 0) assert.ok(d.webhookId > deliveries[i - 1]!.webhookId, `${i}: ${d.webhookId}`);
    }
  });

  test('rotate-secret shows a new secret once; the old one signs beside it for 24 hours', async (t) => {
    const app = await webhookApp(setup, t);
    const endpoint = body<Endpoint>(
      await subscribe(app, app.token, { url: 'https://hooks.example.com/' }),
    );
    const rotated = await app.call({
      method: 'POST',
      url: `/webhooks/${endpoint.id}/rotate-secret`,
      token: app.token,
    });
    assert.equal(rotated.statusCode, 200, rotated.body);
    const { secret } = body<Endpoint>(rotated);
    assert.match(secret!, /^whsec_/);
    assert.notEqual(secret, endpoint.secret);
    await app.call({
      method: 'POST',
      url: '/plants',
      token: await app.newToken(),
      json: '{"name":"a"}',
    });
    await fanOutAll(app.store);
    const now = Date.now();
    const [during] = await app.store.webhookQueue.claim(new Date(now + 23 * 3_600_000), 1, 1);
    assert.deepEqual(during?.endpoint.secrets, [secret, endpoint.secret]);
    const [after] = await app.store.webhookQueue.claim(new Date(now + 24 * 3_600_000 + 1000), 1, 1);
    assert.deepEqual(after?.endpoint.secrets, [secret]);
    const missing = await app.call({
      method: 'POST',
      url: '/webhooks/42/rotate-secret',
      token: app.token,
    });
    assert.equal(missing.statusCode, 404);
  });

  test('past --webhook-max-endpoints, POST /webhooks is 409 (40904) and creates nothing', async (t) => {
    const app = await setup(t, {
      webhookDestinations: destinationCheck(new AddressPolicy(), resolve),
      webhookMaxEndpoints: 2,
    });
    const token = await app.newToken(['webhooks:read', 'webhooks:write']);
    const hook = { url: 'https://hooks.example.com/' };
    for (let i = 0; i < 2; i++) assert.equal((await subscribe(app, token, hook)).statusCode, 201);
    const refused = await subscribe(app, token, hook);
    assert.equal(refused.statusCode, 409, refused.body);
    assert.match(refused.headers['content-type'] as string, /^application\/json/);
    assert.deepEqual(body(refused), {
      error: 40904n,
      message: 'This store has 2 webhook endpoints, the most it allows; delete one first.',
    });
    const listed = body<Endpoint[]>(await app.call({ method: 'GET', url: '/webhooks', token }));
    assert.equal(listed.length, 2, 'nothing was created');
    const deleted = await app.call({ method: 'DELETE', url: `/webhooks/${listed[0]!.id}`, token });
    assert.equal(deleted.statusCode, 204);
    assert.equal((await subscribe(app, token, hook)).statusCode, 201, 'room again after a delete');
  });
});

test('the document describes the three messages, the sample key for plant.created', async (t) => {
  const app = await webhookApp(setup, t);
  const doc = JSON.parse((await app.app.inject({ method: 'GET', url: '/openapi.json' })).body) as {
    webhooks: Record<string, { post: { summary: string; parameters: { name: string }[] } }>;
  };
  assert.deepEqual(Object.keys(doc.webhooks), ['/plant/webhook', 'plant.updated', 'plant.deleted']);
  assert.equal(
    doc.webhooks['/plant/webhook']!.post.summary,
    'plant.created: information about a new plant added to the store',
  );
  assert.deepEqual(
    doc.webhooks['plant.deleted']!.post.parameters.map((p) => p.name),
    ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'webhook-event-type', 'user-agent'],
  );
});
