import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { fingerprintOf, IDEMPOTENCY_KEY_TTL_MS } from '../../src/core/idempotency.js';
import { PlantService } from '../../src/service/plant-service.js';
import { ApiError } from '../../src/core/errors.js';
import { KeyNotHeldError, StoreUnavailableError } from '../../src/store/store.js';
import { forEachBackend } from '../helpers/setup.js';

const errorCode = (res: { body: string }) => (JSON.parse(res.body) as { error: number }).error;

forEachBackend(({ setup }) => {
  describe('POST /plants with Idempotency-Key', () => {
    const post = (json: string, key: string, token?: string) => ({
      method: 'POST',
      url: '/plants',
      json,
      headers: { 'idempotency-key': key },
      ...(token !== undefined && { token }),
    });

    it('a retry with the same key and body replays the first answer, creating nothing', async (t) => {
      const { call } = await setup(t);
      const first = await call(post('{"name":"Fern","tag":"green"}', '"k-1"'));
      assert.equal(first.statusCode, 201, first.body);
      assert.equal(first.headers['idempotent-replayed'], undefined);
      // Reformatted and reordered, quoted or not: the same request.
      const again = await call(post('{ "tag": "green",\n "name": "Fern" }', 'k-1'));
      assert.equal(again.statusCode, 201, again.body);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.body, first.body);
      assert.equal(again.headers.location, first.headers.location);
      assert.equal(again.headers.etag, first.headers.etag);
      const list = await call({ method: 'GET', url: '/plants' });
      assert.equal(list.body, `[${first.body.trimEnd()}]\n`);
    });

    it('a key expires by the app clock: replayed until its TTL is out, then it creates again', async (t) => {
      // The clock the app is given, not the wall clock, must age the key: a test moving it
      // a day on would otherwise still see the first answer.
      let now = Date.now();
      const { call } = await setup(t, { now: () => now });
      const first = await call(post('{"name":"Fern"}', '"k-day"'));
      assert.equal(first.statusCode, 201, first.body);
      now += IDEMPOTENCY_KEY_TTL_MS - 1_000;
      const kept = await call(post('{"name":"Fern"}', '"k-day"'));
      assert.equal(kept.headers['idempotent-replayed'], 'true');
      assert.equal(kept.headers.location, first.headers.location);
      now += 2_000;
      const fresh = await call(post('{"name":"Fern"}', '"k-day"'));
      assert.equal(fresh.statusCode, 201, fresh.body);
      assert.equal(fresh.headers['idempotent-replayed'], undefined);
      assert.notEqual(fresh.headers.location, first.headers.location);
      const list = await call({ method: 'GET', url: '/plants' });
      assert.equal((JSON.parse(list.body) as unknown[]).length, 2);
    });

    it('retries sent together create one plant: the others wait and get its answer', async (t) => {
      const { call } = await setup(t);
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => call(post('{"name":"Fern"}', '"together"'))),
      );
      assert.deepEqual(
        answers.map((answer) => answer.statusCode),
        [201, 201, 201, 201, 201, 201],
        answers.map((answer) => answer.body).join(),
      );
      const replayed = answers.filter((answer) => answer.headers['idempotent-replayed']);
      assert.equal(replayed.length, 5);
      assert.equal(new Set(answers.map((answer) => answer.headers.location)).size, 1);
      const list = await call({ method: 'GET', url: '/plants' });
      assert.equal((JSON.parse(list.body) as unknown[]).length, 1);
    });

    it('without a key, the same body creates twice', async (t) => {
      const { call } = await setup(t);
      await call({ method: 'POST', url: '/plants', json: '{"name":"Fern"}' });
      await call({ method: 'POST', url: '/plants', json: '{"name":"Fern"}' });
      const list = await call({ method: 'GET', url: '/plants' });
      assert.equal((JSON.parse(list.body) as unknown[]).length, 2);
    });

    it('the same key with another body is 422, and the first plant stays the only one', async (t) => {
      const { call } = await setup(t);
      await call(post('{"name":"Fern"}', '"k"'));
      const other = await call(post('{"name":"Ivy"}', '"k"'));
      assert.equal(other.statusCode, 422, other.body);
      assert.equal(errorCode(other), 42201);
      const list = await call({ method: 'GET', url: '/plants' });
      assert.equal((JSON.parse(list.body) as unknown[]).length, 1);
    });

    it('keys belong to the token: another token with the same key creates its own plant', async (t) => {
      const { call, newToken } = await setup(t);
      const other = await newToken();
      const a = await call(post('{"name":"Fern"}', '"shared"'));
      const b = await call(post('{"name":"Fern"}', '"shared"', other));
      assert.equal(b.statusCode, 201);
      assert.equal(b.headers['idempotent-replayed'], undefined);
      assert.notEqual(a.headers.location, b.headers.location);
    });

    it('a retry while the first request is in flight is 409 40903 with Retry-After', async (t) => {
      const { call, store, tokens, token } = await setup(t);
      const record = await tokens.authenticate(token);
      const fingerprint = fingerprintOf({ name: 'Fern' });
      const claimed = await store.idempotency.claim({
        tokenId: record!.id,
        key: 'busy',
        fingerprint,
        at: new Date(),
      });
      assert.equal(claimed.state, 'claimed');
      const retry = await call(post('{"name":"Fern"}', '"busy"'));
      assert.equal(retry.statusCode, 409, retry.body);
      assert.equal(errorCode(retry), 40903);
      assert.equal(retry.headers['retry-after'], '1');
      // With another body it is the body that is wrong.
      const other = await call(post('{"name":"Ivy"}', '"busy"'));
      assert.equal(errorCode(other), 42201);
    });

    it('a refusal is the answer too: replayed even after the conflict is gone', async (t) => {
      const { call } = await setup(t);
      await call({ method: 'POST', url: '/plants', json: '{"id":7,"name":"Fern"}' });
      const refused = await call(post('{"id":7,"name":"Ivy"}', '"k7"'));
      assert.equal(refused.statusCode, 409);
      assert.equal(errorCode(refused), 40901);
      assert.equal(refused.headers['idempotent-replayed'], undefined);
      await call({ method: 'DELETE', url: '/plants/7' });
      const again = await call(post('{"id":7,"name":"Ivy"}', '"k7"'));
      assert.equal(again.statusCode, 409, again.body);
      assert.equal(again.body, refused.body);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal((await call({ method: 'GET', url: '/plants/7' })).statusCode, 404);
    });

    it('an invalid body does not use up the key', async (t) => {
      const { call } = await setup(t);
      const bad = await call(post('{"name":""}', '"k"'));
      assert.equal(bad.statusCode, 400);
      const good = await call(post('{"name":"Fern"}', '"k"'));
      assert.equal(good.statusCode, 201, good.body);
      assert.equal(good.headers['idempotent-replayed'], undefined);
    });

    it('a malformed key is 400 40008, and nothing is created', async (t) => {
      const { call } = await setup(t);
      for (const key of ['""', '"a', 'x'.repeat(256), '"é"', 'a key']) {
        const res = await call(post('{"name":"Fern"}', key));
        assert.equal(res.statusCode, 400, key);
        assert.equal(errorCode(res), 40008, key);
      }
      // A space is printable ASCII: the message says it needs quotes, which do take it.
      const bare = await call(post('{"name":"Fern"}', 'a key'));
      assert.match(bare.body, /in double quotes if it holds a space \(\\"a key\\"\)/);
      // As the message says: a quote or a backslash in quotes, preceded by a backslash.
      for (const refused of ['"a"b"', '"a\\b"']) {
        assert.equal(errorCode(await call(post('{"name":"Fern"}', refused))), 40008, refused);
      }
      assert.equal((await call(post('{"name":"Fern"}', '"a\\"b"'))).statusCode, 201);
      await call({ method: 'DELETE', url: '/plants/1' });
      assert.equal((await call(post('{"name":"Fern"}', '"a key"'))).statusCode, 201);
      await call({ method: 'DELETE', url: '/plants/2' });
      const twice = await call({
        method: 'POST',
        url: '/plants',
        json: '{"name":"Fern"}',
        headers: { 'idempotency-key': ['"a"', '"b"'] },
      });
      assert.equal(errorCode(twice), 40008);
      const list = await call({ method: 'GET', url: '/plants' });
      assert.equal(list.body, '[]\n');
    });

    it('a header on two lines is 400 40008 however it is split, and nothing is created', async (t) => {
      const { call } = await setup(t);
      // Joined by Node with ", ", the first two read as the valid keys `z1, z2` and `, `.
      for (const lines of [
        ['"z1', 'z2"'],
        ['"', '"'],
        ['"k"', '"k"'],
        ['k', ''],
      ]) {
        const res = await call({
          method: 'POST',
          url: '/plants',
          json: '{"name":"Fern"}',
          headers: { 'idempotency-key': lines },
        });
        assert.equal(res.statusCode, 400, JSON.stringify(lines));
        assert.equal(errorCode(res), 40008, JSON.stringify(lines));
      }
      assert.equal((await call({ method: 'GET', url: '/plants' })).body, '[]\n');
    });

    it('a header repeated under names of different case is 400 40008 over TCP too', async (t) => {
      const { app, token } = await setup(t);
      await app.listen({ host: '127.0.0.1', port: 0 });
      const { port } = app.server.address() as AddressInfo;
      const body = '{"name":"Fern"}';
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port });
        const chunks: Buffer[] = [];
        socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
        socket.on('data', (chunk: Buffer) => chunks.push(chunk));
        socket.on('error', reject);
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
        // write, not end: the server may drop a half-closed connection before answering.
        socket.write(
          'POST /plants HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n' +
            `Authorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
            'Idempotency-Key: "z1\r\nIDEMPOTENCY-KEY: z2"\r\n' +
            `Content-Length: ${body.length}\r\n\r\n${body}`,
        );
      });
      assert.match(answer, /^HTTP\/1\.1 400 /);
      assert.match(answer, /\{"error":40008,/);
      const list = await app.inject({
        method: 'GET',
        url: '/plants',
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(list.body, '[]\n');
    });

    it('is ignored on operations other than POST /plants', async (t) => {
      const { call } = await setup(t);
      await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"Fern"}' });
      const first = await call({
        method: 'DELETE',
        url: '/plants/1',
        headers: { 'idempotency-key': '"d"' },
      });
      assert.equal(first.statusCode, 204);
      const second = await call({
        method: 'DELETE',
        url: '/plants/1',
        headers: { 'idempotency-key': '"d"' },
      });
      assert.equal(second.statusCode, 404);
    });
  });

  describe('PlantService.create with a key, in one write', () => {
    it('creates, and replays for a retry, claiming nothing; a refusal goes the long way', async (t) => {
      const { store } = await setup(t);
      const claims: string[] = [];
      const counted = {
        ...store.idempotency,
        claim: (claim: Parameters<typeof store.idempotency.claim>[0]) => {
          claims.push(claim.key);
          return store.idempotency.claim(claim);
        },
      };
      const service = new PlantService(store.plants, counted);
      const by = { tokenId: 1 };
      const created = await service.create({ name: 'Fern' }, by, 'k');
      assert.equal(created.replayed, false);
      assert.deepEqual(claims, []);
      assert.deepEqual(await service.create({ name: 'Fern' }, by, 'k'), {
        plant: created.plant,
        replayed: true,
      });
      assert.deepEqual(claims, []);
      // A refused create takes the long way, which keeps the refusal.
      await assert.rejects(
        service.create({ id: created.plant.id, name: 'Ivy' }, by, 'k2'),
        (error: unknown) => error instanceof ApiError && error.kind.code === 40901,
      );
      assert.deepEqual(claims, ['k2']);
      const kept = await store.idempotency.claim({
        tokenId: 1,
        key: 'k2',
        fingerprint: fingerprintOf({ id: created.plant.id, name: 'Ivy' }),
        at: new Date(),
      });
      assert.equal(kept.state, 'answered');
    });
  });

  describe('PlantService.create with a key, when the database fails', () => {
    it('frees the key, so the retry really creates', async (t) => {
      const { store } = await setup(t);
      const fail = async (): Promise<never> => {
        throw new StoreUnavailableError(new Error('disk on fire'));
      };
      const failing = { ...store.plants, insert: fail, insertWithKey: fail };
      const by = { tokenId: 1 };
      const broken = new PlantService(failing, store.idempotency);
      await assert.rejects(broken.create({ name: 'Fern' }, by, 'k'), StoreUnavailableError);
      const working = new PlantService(store.plants, store.idempotency);
      const created = await working.create({ name: 'Fern' }, by, 'k');
      assert.equal(created.replayed, false);
      const replayed = await working.create({ name: 'Fern' }, by, 'k');
      assert.deepEqual(replayed, { plant: created.plant, replayed: true });
    });
  });

  describe('PlantService.create, when its key was taken over meanwhile', () => {
    it('answers 409 40903 and leaves the key to the request that holds it', async (t) => {
      const { store } = await setup(t);
      // The key taken between the claim and the create: the long way only (insertWithKey
      // takes it in one transaction).
      const lost = {
        ...store.plants,
        insertWithKey: async () => ({ state: 'long-way' }) as const,
        insert: async () => {
          throw new KeyNotHeldError();
        },
      };
      const service = new PlantService(lost, store.idempotency);
      await assert.rejects(
        service.create({ name: 'Fern' }, { tokenId: 1 }, 'k'),
        (error: unknown) => error instanceof ApiError && error.kind.code === 40903,
      );
      const again = await store.idempotency.claim({
        tokenId: 1,
        key: 'k',
        fingerprint: fingerprintOf({ name: 'Fern' }),
        at: new Date(),
      });
      assert.deepEqual(again, { state: 'in-flight' });
    });
  });
});
