import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { test, type TestContext } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { INT64_MAX } from '../../src/core/int64.js';
import { noMetrics } from '../../src/core/metrics.js';
import { CATCH_UP_BATCHES_PER_TURN } from '../../src/http/routes/event-stream.js';
import { readEvents } from '../helpers/event-stream.js';
import { body, forEachBackend, type Setup } from '../helpers/setup.js';

// GET /events, issue 26: the changes feed as JSON pages (with a long poll) and as a stream of
// Server-Sent Events, on both databases. The answers are checked against the served OpenAPI
// document by `call`; the streams are read over a real connection.

interface Event {
  position: bigint;
  type: string;
  at: string;
  data: { id: bigint; name: string; tag?: string };
}

async function feedApp(setup: Setup, t: TestContext, options: Parameters<Setup>[1] = {}) {
  const app = await setup(t, options);
  const token = await app.newToken(['plants:read', 'plants:write', 'events:read']);
  const call = (url: string, headers: Record<string, string> = {}) =>
    app.call({ method: 'GET', url, token, headers });
  const create = async (plant: Record<string, unknown>) => {
    const res = await app.call({ method: 'POST', url: '/plants', token, json: stringify(plant) });
    assert.equal(res.statusCode, 201, res.body);
    return body<{ id: bigint; name: string }>(res);
  };
  return { ...app, token, call, create };
}

const stringify = (value: Record<string, unknown>) =>
  JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? `@${v}@` : v)).replace(
    /"@(-?\d+)@"/g,
    '$1',
  );

const nextOf = (link: unknown) => /^<([^>]+)>; rel="next"$/.exec(String(link))?.[1];

/** A listening app of `maxStreams` slots with two streams of its token open, oldest first. */
async function twoStreams(setup: Setup, t: TestContext, maxStreams: number) {
  const app = await feedApp(setup, t, { events: { maxStreams, heartbeatMs: 600_000 } });
  const base = await app.app.listen({ host: '127.0.0.1', port: 0 });
  const oldest = await readEvents(t, `${base}/events?after=now`, app.token);
  await oldest.firstId();
  const kept = await readEvents(t, `${base}/events?after=now`, app.token);
  await kept.firstId();
  return { app, base, oldest, kept };
}

forEachBackend(({ setup }) => {
  test('pages: every write once, in order, ids exact, Link always to where to go on', async (t) => {
    const app = await feedApp(setup, t);
    const empty = await app.call('/events');
    assert.equal(empty.statusCode, 200);
    assert.deepEqual(body(empty), []);
    assert.equal(nextOf(empty.headers.link), '/events?after=0&limit=100');

    const big = await app.create({ id: INT64_MAX, name: 'Fern', tag: 'shade' });
    const patched = await app.app.inject({
      method: 'PATCH',
      url: `/plants/${big.id}`,
      headers: { authorization: `Bearer ${app.token}`, 'content-type': 'application/json' },
      payload: '{"tag":null}',
    });
    assert.equal(patched.statusCode, 200);
    const aloe = await app.create({ name: 'Aloe' });
    const gone = await app.app.inject({
      method: 'DELETE',
      url: `/plants/${big.id}`,
      headers: { authorization: `Bearer ${app.token}` },
    });
    assert.equal(gone.statusCode, 204);

    const first = await app.call('/events?limit=3');
    const events = body<Event[]>(first);
    assert.deepEqual(
      events.map(({ type, data }) => ({ type, data })),
      [
        { type: 'plant.created', data: { id: INT64_MAX, name: 'Fern', tag: 'shade' } },
        { type: 'plant.updated', data: { id: INT64_MAX, name: 'Fern' } },
        { type: 'plant.created', data: { id: aloe.id, name: 'Aloe' } },
      ],
    );
    assert.match(first.body, /"id":9223372036854775807,/);
    assert.ok(events.every((event) => Math.abs(Date.parse(event.at) - Date.now()) < 60_000));
    const next = nextOf(first.headers.link)!;
    assert.equal(next, `/events?after=${events[2]!.position}&limit=3`);
    const second = await app.call(next);
    const rest = body<Event[]>(second);
    assert.deepEqual(
      rest.map(({ type, data }) => ({ type, data })),
      [{ type: 'plant.deleted', data: { id: INT64_MAX, name: 'Fern' } }],
    );
    assert.ok(rest[0]!.position > events[2]!.position);
    const last = await app.call(nextOf(second.headers.link)!);
    assert.deepEqual(body(last), []);
    assert.equal(nextOf(last.headers.link), `/events?after=${rest[0]!.position}&limit=3`);
  });

  test('a long poll answers as soon as an event comes, or empty at the end of its wait', async (t) => {
    const app = await feedApp(setup, t);
    const started = Date.now();
    const idle = await app.call('/events?wait=1s');
    assert.deepEqual(body(idle), []);
    assert.ok(Date.now() - started >= 900, 'waited');
    assert.equal(nextOf(idle.headers.link), '/events?after=0&limit=100&wait=1s');

    const waiting = app.call('/events?after=0&wait=30s');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const begun = Date.now();
    await app.create({ name: 'Fern' });
    const answered = await waiting;
    t.diagnostic(`the long poll answered ${Date.now() - begun} ms after the create began`);
    assert.equal(Date.now() - begun < 5_000, true);
    assert.deepEqual(
      body<Event[]>(answered).map((event) => event.data.name),
      ['Fern'],
    );
  });

  test('a cursor below the oldest event kept is 410 with the Error body', async (t) => {
    const app = await feedApp(setup, t);
    for (const name of ['a', 'b', 'c']) await app.create({ name });
    const all = body<Event[]>(await app.call('/events'));
    assert.equal(await app.store.events.prune(new Date(Date.now() + 60_000), 2), 2);
    const gone = await app.call('/events?after=0');
    assert.equal(gone.statusCode, 410);
    assert.equal(body<{ error: bigint }>(gone).error, 41001n);
    const kept = await app.call(`/events?after=${all[1]!.position}`);
    assert.deepEqual(
      body<Event[]>(kept).map((event) => event.data.name),
      ['c'],
    );
    const oldest = await app.call('/events');
    assert.deepEqual(
      body<Event[]>(oldest).map((event) => event.data.name),
      ['c'],
    );
    assert.equal(nextOf(oldest.headers.link), `/events?after=${all[2]!.position}&limit=100`);
    const streamed = await app.call('/events?after=0', { accept: 'text/event-stream' });
    assert.equal(streamed.statusCode, 410);
  });

  test('a cursor past the newest event is 410, pages, long polls and streams alike', async (t) => {
    // Such a cursor names events this log never had (another store's, or this one's before a
    // restore): served as an empty page, its reader would skip every event up to it.
    const app = await feedApp(setup, t);
    for (const name of ['a', 'b']) await app.create({ name });
    const newest = body<Event[]>(await app.call('/events')).at(-1)!.position;
    const atHead = await app.call(`/events?after=${newest}`);
    assert.equal(atHead.statusCode, 200);
    assert.deepEqual(body(atHead), []);

    const past = newest + 1n;
    const page = await app.call(`/events?after=${past}`);
    assert.equal(page.statusCode, 410, page.body);
    assert.deepEqual(body(page), {
      error: 41001n,
      message:
        `Position ${past} is past this store's newest event (${newest}): it comes from another ` +
        'store, or from before this one was restored from a backup. Read GET /plants again ' +
        'and follow the events from there.',
    });
    const begun = Date.now();
    const polled = await app.call(`/events?after=${INT64_MAX}&wait=30s`);
    assert.equal(polled.statusCode, 410);
    assert.equal(Date.now() - begun < 10_000, true, 'answered without waiting');
    const streamed = await app.call('/events', {
      accept: 'text/event-stream',
      'last-event-id': String(past),
    });
    assert.equal(streamed.statusCode, 410);
    assert.equal(body<{ error: bigint }>(streamed).error, 41001n);

    await app.create({ name: 'c' });
    const reached = body<Event[]>(await app.call(`/events?after=${newest}`)).at(-1)!.position;
    assert.equal(reached >= past, true);
    const caughtUp = await app.call(`/events?after=${reached}`);
    assert.equal(caughtUp.statusCode, 200, 'once the log reaches a position, it is a cursor');
  });

  test('the scope, the query and Last-Event-ID are checked', async (t) => {
    const app = await feedApp(setup, t);
    const forbidden = await app.app.inject({
      method: 'GET',
      url: '/events',
      headers: { authorization: `Bearer ${await app.newToken(['plants:read'])}` },
    });
    assert.equal(forbidden.statusCode, 403);
    assert.match(String(forbidden.headers['www-authenticate']), /scope="events:read"/);
    for (const query of [
      'after=-1',
      'after=01',
      'limit=0',
      'limit=1001',
      'wait=0s',
      'wait=61s',
      'wait=5',
    ]) {
      const res = await app.call(`/events?${query}`);
      assert.equal(res.statusCode, 400, query);
      assert.equal(body<{ error: bigint }>(res).error, 40002n, query);
      if (query.startsWith('wait=')) {
        assert.equal(
          body<{ message: string }>(res).message,
          'wait must be whole seconds from 1s to 60s, such as 30s.',
        );
      }
    }
    for (const id of ['x', '-1', '007']) {
      const res = await app.call('/events', { accept: 'text/event-stream', 'last-event-id': id });
      assert.equal(res.statusCode, 400, id);
      assert.equal(body<{ error: bigint }>(res).error, 40012n, id);
    }
  });

  test('the stream: events as they happen, id, event and data; resume with Last-Event-ID', async (t) => {
    const app = await feedApp(setup, t, { events: { heartbeatMs: 300 } });
    const base = await app.app.listen({ host: '127.0.0.1', port: 0 });
    const fern = await app.create({ id: INT64_MAX, name: 'Fern' });
    const stream = await readEvents(t, `${base}/events`, app.token);
    assert.equal(stream.response.status, 200);
    assert.match(stream.response.headers.get('content-type')!, /^text\/event-stream/);
    const [created] = await stream.take(1);
    assert.equal(created!.event, 'plant.created');
    assert.equal(created!.data, `{"id":${fern.id},"name":"Fern"}`);

    const begun = Date.now();
    await app.create({ name: 'Aloe', tag: 'sun' });
    const [live] = await stream.take(1);
    t.diagnostic(`a create reached the stream ${Date.now() - begun} ms after it began`);
    assert.equal(live!.event, 'plant.created');
    assert.match(live!.data, /^\{"id":\d+,"name":"Aloe","tag":"sun"\}$/);
    assert.ok(BigInt(live!.id) > BigInt(created!.id));
    await stream.heartbeat();

    const resumed = await readEvents(t, `${base}/events`, app.token, {
      'last-event-id': created!.id,
    });
    assert.deepEqual(await resumed.take(1), [live]);
    const after = await readEvents(t, `${base}/events?after=${live!.id}`, app.token);
    await app.create({ name: 'Third' });
    assert.match((await after.take(1))[0]!.data, /"name":"Third"/);
  });

  test('after=now: only the changes to come, from the position it answers', async (t) => {
    const app = await feedApp(setup, t, { events: { heartbeatMs: 300 } });
    const base = await app.app.listen({ host: '127.0.0.1', port: 0 });
    for (const name of ['a', 'b']) await app.create({ name });
    const head = body<Event[]>(await app.call('/events')).at(-1)!.position;

    const now = await app.call('/events?after=now&limit=5');
    assert.equal(now.statusCode, 200);
    assert.deepEqual(body(now), []);
    assert.equal(nextOf(now.headers.link), `/events?after=${head}&limit=5`);
    await app.create({ name: 'c' });
    const followed = body<Event[]>(await app.call(nextOf(now.headers.link)!));
    assert.deepEqual(
      followed.map((event) => event.data.name),
      ['c'],
    );

    // A long poll from now answers with changes made after it began, never c: plants are
    // created until it answers (it may begin after the first of them).
    let answered = false;
    const waiting = app.call('/events?after=now&wait=30s').finally(() => (answered = true));
    const later: string[] = [];
    while (!answered) {
      later.push(`d${later.length}`);
      await app.create({ name: later.at(-1)! });
      await nextTurn();
    }
    const waited = body<Event[]>(await waiting);
    assert.ok(waited.length > 0, 'the long poll answered with events');
    for (const event of waited) assert.ok(later.includes(event.data.name), event.data.name);
    const latest = body<Event[]>(await app.call(`/events?after=${head}&limit=1000`)).at(-1)!;

    // A stream opens with the position it starts after: where a reader resumes.
    const stream = await readEvents(t, `${base}/events?after=now`, app.token);
    assert.equal(await stream.firstId(), String(latest.position));
    await app.create({ name: 'e' });
    const [live] = await stream.take(1);
    assert.match(live!.data, /"name":"e"/);
    assert.equal(await stream.lastEventId(), live!.id);
    // Last-Event-ID, a stream resumed, wins over `now`.
    const resumed = await readEvents(t, `${base}/events?after=now`, app.token, {
      'last-event-id': String(head),
    });
    assert.equal(await resumed.firstId(), String(head));
    assert.deepEqual(
      (await resumed.take(later.length + 2)).map((event) => /"name":"(\w+)"/.exec(event.data)?.[1]),
      ['c', ...later, 'e'],
    );
    const fromOldest = await readEvents(t, `${base}/events`, app.token);
    assert.equal(await fromOldest.firstId(), '0');

    for (const query of ['after=Now', 'after=now1', 'after=', 'after=later']) {
      const res = await app.call(`/events?${query}`);
      assert.equal(res.statusCode, 400, query);
      const refusal = body<{ error: bigint; message: string }>(res);
      assert.equal(refusal.error, 40002n, query);
      assert.match(
        refusal.message,
        /^after must be a decimal integer from 0 to 9223372036854775807, or now\.$/,
        query,
      );
    }
  });

  test("a stream's slot is free once its client has gone, not at the next heartbeat", async (t) => {
    const app = await feedApp(setup, t, { events: { maxStreams: 1, heartbeatMs: 600_000 } });
    const base = await app.app.listen({ host: '127.0.0.1', port: 0 });
    const first = await readEvents(t, `${base}/events?after=now`, app.token);
    await first.firstId();
    assert.equal((await app.call('/events?wait=1s')).statusCode, 503, 'the one slot is taken');
    first.close();
    // Refused until the server has seen the connection close; with the slot held until the
    // stream's wait ended, this would go on for the heartbeat's ten minutes. Each try yields a
    // turn of the event loop: an injected 503 is answered without I/O, so a loop of them alone
    // never let the close be read, and ran out of memory on a loaded machine.
    while ((await app.call('/events?wait=1s')).statusCode === 503) await nextTurn();
  });

  test('a stream ends once its token is revoked or has expired', async (t) => {
    const app = await feedApp(setup, t, { events: { tokenCheckMs: 50, heartbeatMs: 600_000 } });
    const base = await app.app.listen({ host: '127.0.0.1', port: 0 });
    const revoked = await app.newToken(['events:read']);
    // Long enough to open its stream on a loaded machine first.
    const expiring = await app.newToken(['events:read'], 3_000);
    const kept = await readEvents(t, `${base}/events?after=now`, app.token);
    const first = await readEvents(t, `${base}/events?after=now`, revoked);
    const second = await readEvents(t, `${base}/events?after=now`, expiring);
    await Promise.all([kept.firstId(), first.firstId(), second.firstId()]);
    assert.equal((await app.tokens.revokeToken(revoked)).outcome, 'revoked');
    // Within the token cache's 2 s, and the expiry's 3 s, after the check's 50 ms.
    assert.equal(await first.ended, 'ended');
    assert.equal(await second.ended, 'ended');
    const plant = await app.create({ name: 'after them' });
    const [event] = await kept.take(1);
    assert.match(event!.data, new RegExp(`"id":${plant.id},`));
  });

  test('streams catching up let the event loop turn, a few batches a turn for them all', async (t) => {
    const app = await feedApp(setup, t);
    const base = await app.app.listen({ host: '127.0.0.1', port: 0 });
    // 1,200 plants, 50 at a time: a token has at most 64 requests in flight.
    for (let i = 0; i < 24; i++) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => app.create({ name: `p${i}.${j}` })));
    }
    let turns = 0;
    let counting = true;
    const count = () => {
      turns++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const streams = 10;
    const readers = await Promise.all(
      Array.from({ length: streams }, () => readEvents(t, `${base}/events?after=0`, app.token)),
    );
    await Promise.all(readers.map((reader) => reader.take(1200)));
    counting = false;
    // 10 streams of 12 batches of 100. On SQLite every read is synchronous: streams whose
    // sockets took everything read them all in one turn, every other request waiting; with
    // a turn between each stream's batches, 10 batches a turn (12 turns). Each batch waits
    // for room in a turn, until one is not full.
    const gated = streams * 12;
    assert.ok(turns >= Math.floor(gated / CATCH_UP_BATCHES_PER_TURN), `${turns} turns`);
  });

  test('at --max-event-streams, another token takes the oldest of the one with the most', async (t) => {
    const { app, base, oldest, kept } = await twoStreams(setup, t, 2);
    const other = await app.newToken(['events:read']);
    const asOther = (url: string, accept = 'application/json') =>
      app.app.inject({ url, headers: { authorization: `Bearer ${other}`, accept } });
    // Requests that hold no slot take none: a long poll answered at once, a stream's 410.
    const aloe = await app.create({ name: 'Aloe' });
    assert.equal((await asOther('/events?after=0&wait=1s')).statusCode, 200);
    const past = await asOther(`/events?after=${aloe.id + 1000n}`, 'text/event-stream');
    assert.equal(past.statusCode, 410);
    for (const reader of [oldest, kept])
      assert.equal((await reader.take(1))[0]!.event, 'plant.created');
    // A long poll of the other token: it takes a slot, and answers once it has waited.
    const poll = asOther('/events?after=now&wait=1s');
    assert.equal((await poll).statusCode, 200);
    assert.equal(await oldest.ended, 'ended', "the first token's oldest stream ends cleanly");
    const theirs = await readEvents(t, `${base}/events?after=now`, other);
    await theirs.firstId();
    // One each now: neither token takes the other's slot.
    const refused = await asOther('/events', 'text/event-stream');
    assert.equal(refused.statusCode, 503);
    assert.equal((await app.call('/events?after=now&wait=1s')).statusCode, 503);
    const fern = await app.create({ name: 'Fern' });
    for (const reader of [kept, theirs]) {
      const [event] = await reader.take(1);
      assert.equal(event!.event, 'plant.created');
      assert.match(event!.data, new RegExp(`"id":${fern.id},`));
    }
  });

  test('a long poll whose client left while its page was read takes no slot', async (t) => {
    // One slot left after the first token's two streams: the poll would hold it, and the
    // third token would take the first token's oldest stream instead.
    const { app, base, oldest, kept } = await twoStreams(setup, t, 3);
    // The poll's read of the log (its page of 7) waits until its client has gone.
    const log = app.store.events;
    const read = log.read.bind(log);
    let letRead: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (letRead = resolve));
    let reading: () => void = () => undefined;
    const pollReads = new Promise<void>((resolve) => (reading = resolve));
    log.read = async (after, limit) => {
      if (limit === 7) {
        reading();
        await held;
      }
      return read(after, limit);
    };
    t.after(() => letRead());
    const other = await app.newToken(['events:read']);
    const serverSide = new Promise<Socket>((resolve) => app.app.server.once('connection', resolve));
    const client = connect((app.app.server.address() as AddressInfo).port, '127.0.0.1');
    client.on('error', () => undefined);
    client.write(
      `GET /events?after=0&limit=7&wait=30s HTTP/1.1\r\nHost: x\r\n` +
        `Authorization: Bearer ${other}\r\n\r\n`,
    );
    const socket = await serverSide;
    await pollReads;
    client.destroy();
    await once(socket, 'close');
    letRead();
    const third = await readEvents(
      t,
      `${base}/events?after=now`,
      await app.newToken(['events:read']),
    );
    assert.equal(third.response.status, 200, 'a slot was free: the poll took none');
    await app.create({ name: 'Fern' });
    for (const reader of [oldest, kept]) {
      assert.equal((await reader.take(1))[0]!.event, 'plant.created', 'and ended no stream');
    }
  });

  test('long polls pipelined on a connection that closes hold no slot after it', async (t) => {
    let open = 0;
    const metrics = { ...noMetrics, eventStreams: (count: number) => (open = count) };
    const app = await feedApp(setup, t, { metrics });
    await app.app.listen({ host: '127.0.0.1', port: 0 });
    const serverSide = new Promise<Socket>((resolve) => app.app.server.once('connection', resolve));
    const client = connect((app.app.server.address() as AddressInfo).port, '127.0.0.1');
    client.on('error', () => undefined);
    const poll = `GET /events?after=now&wait=60s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${app.token}\r\n\r\n`;
    // The second one's answer waits behind the first's: Node tells only the first that the
    // connection has closed.
    client.write(poll + poll);
    const socket = await serverSide;
    while (open < 2) await nextTurn();
    client.destroy();
    await once(socket, 'close');
    // Let go once each poll's wait has seen the close (a wait may still be starting the feed,
    // a read of the database); unheard, the second would hold its slot for its 60 s.
    const deadline = Date.now() + 10_000;
    while (open > 0 && Date.now() < deadline) await nextTurn();
    assert.equal(open, 0, 'both slots let go with the connection');
  });

  test('past --max-event-streams, 503 with Retry-After; closing the app ends the streams', async (t) => {
    const app = await feedApp(setup, t, { events: { maxStreams: 2 } });
    const base = await app.app.listen({ host: '127.0.0.1', port: 0 });
    const streams = [
      await readEvents(t, `${base}/events`, app.token),
      await readEvents(t, `${base}/events`, app.token),
    ];
    const refused = await app.call('/events', { accept: 'text/event-stream' });
    assert.equal(refused.statusCode, 503);
    assert.equal(body<{ error: bigint }>(refused).error, 50302n);
    assert.equal(refused.headers['retry-after'], '5');
    const poll = await app.call('/events?wait=5s');
    assert.equal(poll.statusCode, 503, 'a long poll counts too');

    await app.app.close();
    for (const stream of streams) assert.equal(await stream.ended, 'ended');
  });
});
