import assert from 'node:assert/strict';
import { test } from 'node:test';
import { forEachBackend } from '../helpers/setup.js';

// ETag on reads and writes; If-Match on PATCH and DELETE (412 on a mismatch); If-None-Match
// on GET (304 while the plant is unchanged).

// The plant's version in base 36 (core/etag.ts).
const ETAG = /^"[0-9a-z]{1,13}"$/;

function errorCode(body: string): number {
  return (JSON.parse(body) as { error: number }).error;
}

forEachBackend(({ setup }) => {
  test('GET, POST and PATCH answer the ETag of the plant they answer with', async (t) => {
    const { call } = await setup(t);
    const created = await call({ method: 'POST', url: '/plants', json: '{"id":1,"name":"Fern"}' });
    assert.equal(created.statusCode, 201);
    assert.match(String(created.headers.etag), ETAG);
    const read = await call({ method: 'GET', url: '/plants/1' });
    assert.equal(read.headers.etag, created.headers.etag, 'same plant, same tag');
    const patched = await call({ method: 'PATCH', url: '/plants/1', json: '{"tag":"x"}' });
    assert.match(String(patched.headers.etag), ETAG);
    assert.notEqual(patched.headers.etag, read.headers.etag, 'changed plant, new tag');
    const again = await call({ method: 'GET', url: '/plants/1' });
    assert.equal(again.headers.etag, patched.headers.etag);
  });

  test('two clients that read the same version cannot overwrite each other blindly', async (t) => {
    const { call } = await setup(t);
    await call({
      method: 'POST',
      url: '/plants',
      json: '{"id":9223372036854775807,"name":"Fern"}',
    });
    const url = '/plants/9223372036854775807';
    const { etag } = (await call({ method: 'GET', url })).headers;
    const headers = { 'if-match': String(etag) };
    const first = await call({ method: 'PATCH', url, json: '{"name":"Ivy"}', headers });
    assert.equal(first.statusCode, 200, first.body);
    const second = await call({ method: 'PATCH', url, json: '{"name":"Moss"}', headers });
    assert.equal(second.statusCode, 412, second.body);
    assert.equal(errorCode(second.body), 41201);
    assert.equal(JSON.parse((await call({ method: 'GET', url })).body).name, 'Ivy');
    const stale = await call({ method: 'DELETE', url, headers });
    assert.equal(stale.statusCode, 412);
    assert.equal((await call({ method: 'GET', url })).statusCode, 200, 'not deleted');
    const current = { 'if-match': String(first.headers.etag) };
    assert.equal((await call({ method: 'DELETE', url, headers: current })).statusCode, 204);
  });

  test('If-Match: *, lists, weak tags, missing plants and malformed values', async (t) => {
    const { call } = await setup(t);
    const created = await call({ method: 'POST', url: '/plants', json: '{"id":3,"name":"Fern"}' });
    const etag = String(created.headers.etag);
    const patch = (ifMatch: string) =>
      call({ method: 'PATCH', url: '/plants/3', json: '{}', headers: { 'if-match': ifMatch } });
    assert.equal((await patch('*')).statusCode, 200, 'any current representation');
    assert.equal((await patch(`"nope", ${etag}`)).statusCode, 200, 'one of a list');
    assert.equal((await patch(`, "nope",, ${etag} ,`)).statusCode, 200, 'empty elements');
    const weak = await patch(`W/${etag}`);
    assert.equal(weak.statusCode, 412, 'weak tags never match strongly');
    // The plant has not changed: the answer says what is wrong with the tag instead.
    assert.match(
      weak.body,
      /a weak one \(W\/\\"...\\"\) never matches: send plant 3's ETag as it was given/,
    );
    const mixed = await patch(`"nope", W/${etag}`);
    assert.match(mixed.body, /a weak one \(W\/\\"...\\"\) never matches/, 'among others');
    for (const stale of ['"nope"', 'W/"nope"']) {
      const res = await patch(stale);
      assert.equal(res.statusCode, 412);
      assert.match(res.body, /Plant 3 has changed since the ETag given/, stale);
    }
    for (const bad of ['nope', '"a" "b"', ',', '"unterminated', '*, "a"']) {
      const res = await patch(bad);
      assert.equal(res.statusCode, 400, bad);
      assert.equal(errorCode(res.body), 40007, bad);
    }
    const missing = await call({
      method: 'DELETE',
      url: '/plants/4',
      headers: { 'if-match': '*' },
    });
    assert.equal(missing.statusCode, 404, 'a missing plant is 404, conditions aside');
    assert.equal(errorCode(missing.body), 40401);
  });

  test('If-None-Match: 304 without a body while the plant is unchanged, the plant after', async (t) => {
    const { call } = await setup(t);
    const url = '/plants/9223372036854775807';
    await call({
      method: 'POST',
      url: '/plants',
      json: '{"id":9223372036854775807,"name":"Fern"}',
    });
    const etag = String((await call({ method: 'GET', url })).headers.etag);
    const read = (ifNoneMatch: string) =>
      call({ method: 'GET', url, headers: { 'if-none-match': ifNoneMatch } });
    for (const held of [etag, `W/${etag}`, `"nope", ${etag}`, `"nope",,${etag},`, '*']) {
      const res = await read(held);
      assert.equal(res.statusCode, 304, held);
      assert.equal(res.body, '', held);
      assert.equal(res.headers.etag, etag, held);
    }
    const other = await read('"nope"');
    assert.equal(other.statusCode, 200);
    assert.equal(JSON.parse(other.body).name, 'Fern');
    const patched = await call({ method: 'PATCH', url, json: '{"name":"Ivy"}' });
    const changed = await read(etag);
    assert.equal(changed.statusCode, 200, 'the plant changed since the tag');
    assert.equal(changed.headers.etag, patched.headers.etag);
    assert.equal(JSON.parse(changed.body).name, 'Ivy');
    for (const bad of ['nope', '"a" "b"', '']) {
      const res = await read(bad);
      assert.equal(res.statusCode, 400, bad);
      assert.equal(errorCode(res.body), 40007, bad);
      assert.match(res.body, /If-None-Match must be/, bad);
    }
    const missing = await call({
      method: 'GET',
      url: '/plants/4',
      headers: { 'if-none-match': '*' },
    });
    assert.equal(missing.statusCode, 404, 'no plant, no representation to keep');
  });
});
