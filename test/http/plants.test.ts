import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { body, forEachBackend, type TestApp } from '../helpers/setup.js';

// The operations around the contract's DELETE: create, read, update, list (docs/decisions.md §7).

interface PlantJson {
  id: bigint;
  name: string;
  tag?: string;
}

interface ErrorJson {
  error: bigint;
  message: string;
}

type CallFn = TestApp['call'];

const INT64_MAX = '9223372036854775807';
const INT64_MIN = '-9223372036854775808';

const create = (call: CallFn, json: string) => call({ method: 'POST', url: '/plants', json });

/** Asserts an Error answer with exactly this status and code. */
function assertError(res: LightMyRequestResponse, status: number, code: bigint, what = ''): void {
  assert.equal(res.statusCode, status, `${what} ${res.body}`);
  assert.match(String(res.headers['content-type']), /^application\/json/, what);
  const parsed = body<ErrorJson>(res);
  assert.deepEqual(Object.keys(parsed).sort(), ['error', 'message'], what);
  assert.equal(parsed.error, code, what);
  assert.equal(typeof parsed.message, 'string', what);
}

const ids = (res: LightMyRequestResponse) => body<PlantJson[]>(res).map((plant) => plant.id);

forEachBackend(({ setup }) => {
  // ---------------------------------------------------------------- POST /plants

  test('POST with an id answers 201, Location /plants/<id>, and the plant as body', async (t) => {
    const { call } = await setup(t);
    const res = await create(call, '{"id":42,"name":"Fern","tag":"shade"}');
    assert.equal(res.statusCode, 201);
    assert.equal(res.headers.location, '/plants/42');
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.deepEqual(body(res), { id: 42n, name: 'Fern', tag: 'shade' });
  });

  test('POST without a tag answers a plant with no tag property', async (t) => {
    const { call } = await setup(t);
    const res = await create(call, '{"id":1,"name":"Fern"}');
    assert.equal(res.statusCode, 201);
    assert.equal(res.body, '{"id":1,"name":"Fern"}\n');
  });

  test('POST with a negative id is accepted', async (t) => {
    const { call } = await setup(t);
    const res = await create(call, '{"id":-5,"name":"Fern"}');
    assert.equal(res.statusCode, 201);
    assert.equal(res.headers.location, '/plants/-5');
    assert.deepEqual(body(res), { id: -5n, name: 'Fern' });
  });

  test('POST without an id assigns one, with Location naming it', async (t) => {
    const { call } = await setup(t);
    const res = await create(call, '{"name":"Fern"}');
    assert.equal(res.statusCode, 201);
    const plant = body<PlantJson>(res);
    assert.equal(typeof plant.id, 'bigint');
    assert.equal(plant.name, 'Fern');
    assert.equal(res.headers.location, `/plants/${plant.id}`);
    const read = await call({ method: 'GET', url: `/plants/${plant.id}` });
    assert.equal(read.statusCode, 200);
    assert.equal(read.body, res.body);
  });

  test('server-assigned ids increase and never reuse the id of a deleted plant', async (t) => {
    const { call } = await setup(t);
    const first = body<PlantJson>(await create(call, '{"name":"a"}')).id;
    const second = body<PlantJson>(await create(call, '{"name":"b"}')).id;
    assert.ok(second > first, `${second} > ${first}`);
    assert.equal((await call({ method: 'DELETE', url: `/plants/${second}` })).statusCode, 204);
    const third = body<PlantJson>(await create(call, '{"name":"c"}')).id;
    assert.ok(third > second, `${third} > ${second} (deleted)`);
  });

  test('a server-assigned id is never one a client supplied, even once deleted', async (t) => {
    const { call } = await setup(t);
    const first = body<PlantJson>(await create(call, '{"name":"a"}')).id;
    assert.equal((await create(call, `{"id":${first + 1n},"name":"b"}`)).statusCode, 201);
    assert.equal((await call({ method: 'DELETE', url: `/plants/${first + 1n}` })).statusCode, 204);
    const assigned = body<PlantJson>(await create(call, '{"name":"c"}')).id;
    assert.equal(assigned, first + 2n);
  });

  test('POST with an id already in use answers 409 40901 and leaves the plant alone', async (t) => {
    const { call } = await setup(t);
    assert.equal((await create(call, '{"id":3,"name":"Fern"}')).statusCode, 201);
    const res = await create(call, '{"id":3,"name":"Other"}');
    assertError(res, 409, 40901n);
    assert.equal(res.headers.location, undefined);
    const read = await call({ method: 'GET', url: '/plants/3' });
    assert.equal(read.body, '{"id":3,"name":"Fern"}\n');
  });

  test('after a plant with id 9223372036854775807, POST without id still answers 201', async (t) => {
    const { call } = await setup(t);
    const max = await create(call, `{"id":${INT64_MAX},"name":"last"}`);
    assert.equal(max.statusCode, 201);
    assert.equal(max.headers.location, `/plants/${INT64_MAX}`);
    const next = await create(call, '{"name":"next"}');
    assert.equal(next.statusCode, 201, next.body);
    assert.ok(body<PlantJson>(next).id < BigInt(INT64_MAX));
  });

  test('once the server has assigned up to 9223372036854775807, POST without id answers 409 40902', async (t) => {
    const { call, database } = await setup(t);
    // As if the server had assigned every id up to the largest (migration 0004's counter).
    await database.setLastAssigned(BigInt(INT64_MAX));
    assertError(await create(call, '{"name":"next"}'), 409, 40902n);
    // Client-supplied ids still work.
    assert.equal((await create(call, '{"id":5,"name":"five"}')).statusCode, 201);
  });

  test('POST with the id as a JSON string answers 400 40004', async (t) => {
    const { call } = await setup(t);
    assertError(await create(call, '{"id":"12","name":"Fern"}'), 400, 40004n);
    assert.equal((await call({ method: 'GET', url: '/plants/12' })).statusCode, 404);
  });

  test('POST with a non-integer or out-of-range id answers 400 40004', async (t) => {
    const { call } = await setup(t);
    for (const id of ['1.5', '9223372036854775808', '-9223372036854775809', 'null', 'true']) {
      assertError(await create(call, `{"id":${id},"name":"Fern"}`), 400, 40004n, id);
    }
  });

  test('POST with an unknown property answers 400 40004', async (t) => {
    const { call } = await setup(t);
    assertError(await create(call, '{"id":1,"name":"Fern","colour":"green"}'), 400, 40004n);
    assert.equal((await call({ method: 'GET', url: '/plants/1' })).statusCode, 404);
  });

  test('POST with a missing or invalid name answers 400 40004', async (t) => {
    const { call } = await setup(t);
    const cases: Record<string, string> = {
      missing: '{"id":1}',
      empty: '{"id":1,"name":""}',
      'white space only': '{"id":1,"name":" \\t\\n "}',
      'a U+0000 in it': '{"id":1,"name":"a\\u0000b"}',
      'only U+0000': '{"id":1,"name":"\\u0000"}',
      'a U+0000 in the tag': '{"id":1,"name":"a","tag":"x\\u0000"}',
      '101 characters': `{"id":1,"name":"${'n'.repeat(101)}"}`,
      'not a string': '{"id":1,"name":5}',
      null: '{"id":1,"name":null}',
    };
    for (const [what, json] of Object.entries(cases)) {
      assertError(await create(call, json), 400, 40004n, what);
    }
    assert.equal((await call({ method: 'GET', url: '/plants/1' })).statusCode, 404);
  });

  test('POST with a name of exactly 100 characters is accepted', async (t) => {
    const { call } = await setup(t);
    const name = 'n'.repeat(100);
    const res = await create(call, `{"id":1,"name":"${name}"}`);
    assert.equal(res.statusCode, 201);
    assert.deepEqual(body(res), { id: 1n, name });
  });

  test('name length counts characters (code points), not UTF-16 units or bytes', async (t) => {
    const { call } = await setup(t);
    const leaf = '\u{1F33F}'; // one code point, two UTF-16 units, four UTF-8 bytes
    const ok = await create(call, JSON.stringify({ id: 1, name: leaf.repeat(100) }));
    assert.equal(ok.statusCode, 201);
    assert.equal(body<PlantJson>(ok).name, leaf.repeat(100));
    assertError(await create(call, JSON.stringify({ id: 2, name: leaf.repeat(101) })), 400, 40004n);
  });

  test('POST with a tag of 51 characters or an empty tag answers 400 40004; 50 is accepted', async (t) => {
    const { call } = await setup(t);
    assertError(await create(call, `{"id":1,"name":"a","tag":"${'t'.repeat(51)}"}`), 400, 40004n);
    assertError(await create(call, '{"id":1,"name":"a","tag":""}'), 400, 40004n);
    const ok = await create(call, `{"id":1,"name":"a","tag":"${'t'.repeat(50)}"}`);
    assert.equal(ok.statusCode, 201);
  });

  test('POST with malformed JSON answers 400 40003', async (t) => {
    const { call } = await setup(t);
    for (const json of ['{"name":', '{name:"a"}', "{'name':'a'}", '{"name":"a"} x', '']) {
      assertError(await create(call, json), 400, 40003n, JSON.stringify(json));
    }
  });

  test('POST with a duplicate key answers 400 40003', async (t) => {
    const { call } = await setup(t);
    assertError(await create(call, '{"id":1,"name":"a","name":"b"}'), 400, 40003n);
    assert.equal((await call({ method: 'GET', url: '/plants/1' })).statusCode, 404);
  });

  test('POST with a JSON array, number, string or null as body answers 400 40004', async (t) => {
    const { call } = await setup(t);
    for (const json of ['[{"id":1,"name":"a"}]', '42', '"Fern"', 'null']) {
      assertError(await create(call, json), 400, 40004n, json);
    }
  });

  test('POST with a text/plain or merge-patch body answers 415 41501', async (t) => {
    const { call } = await setup(t);
    for (const type of ['text/plain', 'application/merge-patch+json', 'application/xml']) {
      const res = await call({
        method: 'POST',
        url: '/plants',
        json: '{"id":1,"name":"a"}',
        headers: { 'content-type': type },
      });
      assertError(res, 415, 41501n, type);
    }
    assert.equal((await call({ method: 'GET', url: '/plants/1' })).statusCode, 404);
  });

  test('POST accepts application/json with charset=utf-8, and refuses other charsets', async (t) => {
    const { call } = await setup(t);
    const ok = await call({
      method: 'POST',
      url: '/plants',
      json: '{"id":1,"name":"a"}',
      headers: { 'content-type': 'Application/JSON; charset=UTF-8' },
    });
    assert.equal(ok.statusCode, 201);
    const latin1 = await call({
      method: 'POST',
      url: '/plants',
      json: '{"id":2,"name":"a"}',
      headers: { 'content-type': 'application/json; charset=iso-8859-1' },
    });
    assertError(latin1, 415, 41501n);
  });

  test('POST with a body but no content-type answers 415 41501', async (t) => {
    const { call } = await setup(t);
    const res = await call({ method: 'POST', url: '/plants', payload: '{"id":1,"name":"a"}' });
    assertError(res, 415, 41501n);
  });

  test('POST with a body over 64 KiB answers 413 41301', async (t) => {
    const { call } = await setup(t);
    const json = `{"id":1,"name":"a","tag":"${'t'.repeat(64 * 1024)}"}`;
    assertError(await create(call, json), 413, 41301n);
    assert.equal((await call({ method: 'GET', url: '/plants/1' })).statusCode, 404);
  });

  test('POST with a body just under 64 KiB is parsed (and validated)', async (t) => {
    const { call } = await setup(t);
    // Valid JSON padded with white space to exactly the limit: parsed, then accepted.
    const core = '{"id":1,"name":"a"}';
    const json = core + ' '.repeat(64 * 1024 - core.length);
    assert.equal(Buffer.byteLength(json), 64 * 1024);
    assert.equal((await create(call, json)).statusCode, 201);
  });

  test('POST with a query parameter answers 400 40002', async (t) => {
    const { call } = await setup(t);
    const res = await call({ method: 'POST', url: '/plants?id=1', json: '{"name":"a"}' });
    assertError(res, 400, 40002n);
  });

  // ---------------------------------------------------------------- GET /plants/{id}

  test('GET of an existing plant answers 200 with the plant', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":9,"name":"Fern","tag":"shade"}');
    const res = await call({ method: 'GET', url: '/plants/9' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(res.body, '{"id":9,"name":"Fern","tag":"shade"}\n');
  });

  test('GET of an unknown plant answers 404 40401', async (t) => {
    const { call } = await setup(t);
    assertError(await call({ method: 'GET', url: '/plants/9' }), 404, 40401n);
  });

  test('GET of a malformed id answers 400 40001', async (t) => {
    const { call } = await setup(t);
    assertError(await call({ method: 'GET', url: '/plants/09' }), 400, 40001n);
  });

  // ---------------------------------------------------------------- PATCH /plants/{id}

  const patch = (call: CallFn, url: string, json: string, type = 'application/merge-patch+json') =>
    call({ method: 'PATCH', url, json, headers: { 'content-type': type } });

  test('PATCH with application/merge-patch+json changes the name and keeps the tag', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"Fern","tag":"shade"}');
    const res = await patch(call, '/plants/1', '{"name":"Palm"}');
    assert.equal(res.statusCode, 200);
    assert.deepEqual(body(res), { id: 1n, name: 'Palm', tag: 'shade' });
    const read = await call({ method: 'GET', url: '/plants/1' });
    assert.equal(read.body, res.body);
  });

  test('PATCH with application/json is accepted too', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"Fern"}');
    const res = await patch(call, '/plants/1', '{"tag":"sun"}', 'application/json');
    assert.equal(res.statusCode, 200);
    assert.deepEqual(body(res), { id: 1n, name: 'Fern', tag: 'sun' });
  });

  test('PATCH with "tag": null removes the tag', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"Fern","tag":"shade"}');
    const res = await patch(call, '/plants/1', '{"tag":null}');
    assert.equal(res.statusCode, 200);
    assert.equal(res.body, '{"id":1,"name":"Fern"}\n');
    const read = await call({ method: 'GET', url: '/plants/1' });
    assert.equal(read.body, '{"id":1,"name":"Fern"}\n');
    const list = await call({ method: 'GET', url: '/plants?tag=shade' });
    assert.equal(list.body, '[]\n');
  });

  test('PATCH with {} leaves the plant unchanged', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"Fern","tag":"shade"}');
    const res = await patch(call, '/plants/1', '{}');
    assert.equal(res.statusCode, 200);
    assert.equal(res.body, '{"id":1,"name":"Fern","tag":"shade"}\n');
  });

  test('PATCH with "name": null answers 400 40004 and changes nothing', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"Fern","tag":"shade"}');
    assertError(await patch(call, '/plants/1', '{"name":null,"tag":"x"}'), 400, 40004n);
    const read = await call({ method: 'GET', url: '/plants/1' });
    assert.equal(read.body, '{"id":1,"name":"Fern","tag":"shade"}\n');
  });

  test('PATCH with an invalid name or tag answers 400 40004', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"Fern"}');
    for (const json of [
      '{"name":""}',
      '{"name":"   "}',
      `{"name":"${'n'.repeat(101)}"}`,
      `{"tag":"${'t'.repeat(51)}"}`,
      '{"tag":""}',
      '{"tag":5}',
      '[]',
      'null',
    ]) {
      assertError(await patch(call, '/plants/1', json), 400, 40004n, json);
    }
  });

  test('PATCH with an id answers 400 40004, even the same id', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"Fern"}');
    assertError(await patch(call, '/plants/1', '{"id":2}'), 400, 40004n);
    assertError(await patch(call, '/plants/1', '{"id":1,"name":"x"}'), 400, 40004n);
    assert.equal((await call({ method: 'GET', url: '/plants/2' })).statusCode, 404);
    assert.equal(
      (await call({ method: 'GET', url: '/plants/1' })).body,
      '{"id":1,"name":"Fern"}\n',
    );
  });

  test('PATCH of an unknown plant answers 404 40401', async (t) => {
    const { call } = await setup(t);
    assertError(await patch(call, '/plants/1', '{"name":"x"}'), 404, 40401n);
  });

  test('PATCH with text/plain answers 415 41501', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"Fern"}');
    assertError(await patch(call, '/plants/1', '{"name":"x"}', 'text/plain'), 415, 41501n);
    assert.equal(
      (await call({ method: 'GET', url: '/plants/1' })).body,
      '{"id":1,"name":"Fern"}\n',
    );
  });

  test('PATCH with malformed JSON answers 400 40003', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"Fern"}');
    assertError(await patch(call, '/plants/1', '{"name":'), 400, 40003n);
  });

  // ---------------------------------------------------------------- GET /plants

  test('GET /plants answers a bare JSON array, ascending by id, negative ids included', async (t) => {
    const { call } = await setup(t);
    for (const id of ['5', '-3', INT64_MAX, '0', INT64_MIN, '2']) {
      assert.equal((await create(call, `{"id":${id},"name":"p${id}"}`)).statusCode, 201);
    }
    const res = await call({ method: 'GET', url: '/plants' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(res.headers.link, undefined);
    assert.equal(
      res.body,
      `[{"id":${INT64_MIN},"name":"p${INT64_MIN}"},{"id":-3,"name":"p-3"},{"id":0,"name":"p0"},` +
        `{"id":2,"name":"p2"},{"id":5,"name":"p5"},{"id":${INT64_MAX},"name":"p${INT64_MAX}"}]\n`,
    );
  });

  test('each plant of a list page is, byte for byte, what GET /plants/{id} answers', async (t) => {
    // The page's text comes from the store (PlantListing), a plant's from the schema's
    // serializer: this holds the two to one shape.
    const { call } = await setup(t);
    const names = [
      'plain',
      'quote " back \\ slash',
      'tab\t line\n\u0001\u001f\u007f',
      '\u2028\u2029 😀 é',
    ];
    for (const [i, name] of names.entries()) {
      const plant = i % 2 === 0 ? { id: i, name, tag: `${name} tag` } : { id: i, name };
      assert.equal((await create(call, JSON.stringify(plant))).statusCode, 201);
    }
    const list = await call({ method: 'GET', url: '/plants' });
    const singles = await Promise.all(
      names.map((_, i) => call({ method: 'GET', url: `/plants/${i}` })),
    );
    assert.equal(list.body, `[${singles.map((res) => res.body.trimEnd()).join(',')}]\n`);
  });

  test('GET /plants with no plants answers [] and no Link', async (t) => {
    const { call } = await setup(t);
    const res = await call({ method: 'GET', url: '/plants' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.body, '[]\n');
    assert.equal(res.headers.link, undefined);
  });

  test('GET /plants returns 100 plants by default, with a Link to the rest', async (t) => {
    const { call, store } = await setup(t);
    for (let id = 1n; id <= 101n; id++) await store.plants.insert({ id, name: `p${id}` });
    const res = await call({ method: 'GET', url: '/plants' });
    assert.equal(res.statusCode, 200);
    const page = ids(res);
    assert.equal(page.length, 100);
    assert.equal(page[0], 1n);
    assert.equal(page[99], 100n);
    assert.equal(res.headers.link, '</plants?limit=100&after=100>; rel="next"');
    const rest = await call({ method: 'GET', url: '/plants?limit=100&after=100' });
    assert.deepEqual(ids(rest), [101n]);
    assert.equal(rest.headers.link, undefined);
  });

  test('GET /plants accepts limit 1 and 1000', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"a"}');
    await create(call, '{"id":2,"name":"b"}');
    const one = await call({ method: 'GET', url: '/plants?limit=1' });
    assert.equal(one.statusCode, 200);
    assert.deepEqual(ids(one), [1n]);
    const many = await call({ method: 'GET', url: '/plants?limit=1000' });
    assert.equal(many.statusCode, 200);
    assert.deepEqual(ids(many), [1n, 2n]);
  });

  test('GET /plants with an invalid limit answers 400 40002', async (t) => {
    const { call } = await setup(t);
    for (const query of [
      'limit=0',
      'limit=1001',
      'limit=-1',
      'limit=abc',
      'limit=1.5',
      'limit=',
      'limit=01',
      'limit=1e2',
      'limit=1&limit=2',
    ]) {
      assertError(await call({ method: 'GET', url: `/plants?${query}` }), 400, 40002n, query);
    }
  });

  test('GET /plants with an unknown query parameter answers 400 40002', async (t) => {
    const { call } = await setup(t);
    assertError(await call({ method: 'GET', url: '/plants?sort=desc' }), 400, 40002n);
    assertError(await call({ method: 'GET', url: '/plants?limit=2&offset=4' }), 400, 40002n);
  });

  test('with 5 plants and limit=2 the Link header is exactly the next page', async (t) => {
    const { call } = await setup(t);
    for (const id of [10, 20, 30, 40, 50]) await create(call, `{"id":${id},"name":"p"}`);
    const res = await call({ method: 'GET', url: '/plants?limit=2' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(ids(res), [10n, 20n]);
    assert.equal(res.headers.link, '</plants?limit=2&after=20>; rel="next"');
  });

  /** Follows Link rel="next" from `url`, returning every page's ids. */
  async function walk(call: CallFn, url: string): Promise<bigint[][]> {
    const pages: bigint[][] = [];
    let next: string | undefined = url;
    while (next !== undefined) {
      const res = await call({ method: 'GET', url: next });
      assert.equal(res.statusCode, 200, next);
      pages.push(ids(res));
      const link = res.headers.link;
      if (link === undefined) {
        next = undefined;
      } else {
        const match = /^<([^>]+)>; rel="next"$/.exec(String(link));
        assert.ok(match, `Link: ${link}`);
        next = match[1];
      }
      assert.ok(pages.length <= 20, 'too many pages');
    }
    return pages;
  }

  test('following Link visits every plant exactly once; the last page has no Link', async (t) => {
    const { call } = await setup(t);
    const all = [-7n, 1n, 2n, 3n, 9223372036854775807n];
    for (const id of all) await create(call, `{"id":${id},"name":"p"}`);
    const pages = await walk(call, '/plants?limit=2');
    assert.deepEqual(pages, [[-7n, 1n], [2n, 3n], [9223372036854775807n]]);
  });

  test('a full last page with nothing after it has no Link', async (t) => {
    const { call } = await setup(t);
    for (const id of [1, 2, 3, 4]) await create(call, `{"id":${id},"name":"p"}`);
    const pages = await walk(call, '/plants?limit=2');
    assert.deepEqual(pages, [
      [1n, 2n],
      [3n, 4n],
    ]);
    const exact = await call({ method: 'GET', url: '/plants?limit=4' });
    assert.deepEqual(ids(exact), [1n, 2n, 3n, 4n]);
    assert.equal(exact.headers.link, undefined);
  });

  test('the tag filter returns only plants with that tag', async (t) => {
    const { call } = await setup(t);
    await create(call, '{"id":1,"name":"a","tag":"shade"}');
    await create(call, '{"id":2,"name":"b","tag":"sun"}');
    await create(call, '{"id":3,"name":"c"}');
    await create(call, '{"id":4,"name":"d","tag":"shade"}');
    const res = await call({ method: 'GET', url: '/plants?tag=shade' });
    assert.equal(res.statusCode, 200);
    assert.equal(
      res.body,
      '[{"id":1,"name":"a","tag":"shade"},{"id":4,"name":"d","tag":"shade"}]\n',
    );
    const none = await call({ method: 'GET', url: '/plants?tag=rain' });
    assert.equal(none.body, '[]\n');
  });

  test('the tag filter is kept, URL-encoded, in the next Link', async (t) => {
    const { call } = await setup(t);
    const tag = 'a b&c=d/é';
    for (const id of [1, 2, 3, 4, 5]) {
      const tagged = id % 2 === 1 ? tag : 'other';
      await create(call, JSON.stringify({ id, name: 'p', tag: tagged }));
    }
    const url = `/plants?limit=1&tag=${encodeURIComponent(tag)}`;
    const first = await call({ method: 'GET', url });
    assert.deepEqual(ids(first), [1n]);
    assert.equal(
      first.headers.link,
      '</plants?limit=1&after=1&tag=a%20b%26c%3Dd%2F%C3%A9>; rel="next"',
    );
    const pages = await walk(call, url);
    assert.deepEqual(pages, [[1n], [3n], [5n]]);
  });

  test('after accepts the whole int64 range', async (t) => {
    const { call } = await setup(t);
    for (const id of [INT64_MIN, '-1', '0', INT64_MAX])
      await create(call, `{"id":${id},"name":"p"}`);
    const fromMin = await call({ method: 'GET', url: `/plants?after=${INT64_MIN}` });
    assert.equal(fromMin.statusCode, 200);
    assert.deepEqual(ids(fromMin), [-1n, 0n, 9223372036854775807n]);
    const fromMax = await call({ method: 'GET', url: `/plants?after=${INT64_MAX}` });
    assert.equal(fromMax.statusCode, 200);
    assert.equal(fromMax.body, '[]\n');
    const beforeMax = await call({ method: 'GET', url: '/plants?after=9223372036854775806' });
    assert.deepEqual(ids(beforeMax), [9223372036854775807n]);
    const fromMinus = await call({ method: 'GET', url: '/plants?after=-2' });
    assert.deepEqual(ids(fromMinus), [-1n, 0n, 9223372036854775807n]);
  });

  test('after out of range or malformed answers 400 40002', async (t) => {
    const { call } = await setup(t);
    for (const after of [
      '9223372036854775808',
      '-9223372036854775809',
      '99999999999999999999',
      'abc',
      '1.5',
      '01',
      '-0',
      '+1',
      '',
    ]) {
      const res = await call({ method: 'GET', url: `/plants?after=${encodeURIComponent(after)}` });
      assertError(res, 400, 40002n, after);
    }
  });

  test('an invalid tag filter answers 400 40002', async (t) => {
    const { call } = await setup(t);
    assertError(await call({ method: 'GET', url: `/plants?tag=${'t'.repeat(51)}` }), 400, 40002n);
    assertError(await call({ method: 'GET', url: '/plants?tag=' }), 400, 40002n);
  });
});
