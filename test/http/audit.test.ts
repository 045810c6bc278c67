import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cli } from '../helpers/server-process.js';
import { forEachBackend } from '../helpers/setup.js';

const errorOf = (res: { body: string }) => (JSON.parse(res.body) as { error: number }).error;

interface JsonEntry {
  seq: number;
  at: string;
  action: string;
  plantId: number | string;
  tokenId: number | null;
  requestId: string | null;
  before: unknown;
  after: unknown;
}

/** `audit --json` output, with ids kept as the exact text they were printed as. */
const entries = (stdout: string): JsonEntry[] =>
  stdout
    .split('\n')
    .filter((line) => line !== '')
    .map(
      (line) =>
        JSON.parse(
          line.replace(/"plantId":(-?\d+)/, '"plantId":"$1"').replace(/"id":(-?\d+)/g, '"id":"$1"'),
        ) as JsonEntry,
    );

forEachBackend(({ setup }) => {
  describe('audit trail through the API', () => {
    it('records create, update and delete with token, request id and the plant before and after; `audit` prints them', async (t) => {
      const { call, database, tokens, token } = await setup(t);
      const tokenId = (await tokens.authenticate(token))!.id;
      const id = '9223372036854775807';
      const created = await call({
        method: 'POST',
        url: '/plants',
        json: `{"id":${id},"name":"Fern","tag":"green"}`,
        headers: { 'x-request-id': 'req-create' },
      });
      assert.equal(created.statusCode, 201);
      await call({
        method: 'PATCH',
        url: `/plants/${id}`,
        json: '{"tag":null}',
        headers: { 'x-request-id': 'req-update' },
      });
      const deleted = await call({ method: 'DELETE', url: `/plants/${id}` });
      assert.equal(deleted.statusCode, 204);
      // Refused and failed writes are not writes.
      await call({ method: 'DELETE', url: `/plants/${id}` });
      await call({ method: 'PATCH', url: '/plants/1', json: '{"name":"x"}' });
      // Gone from the API...
      assert.equal((await call({ method: 'GET', url: `/plants/${id}` })).statusCode, 404);

      // ...but its last state is in the audit trail.
      const { stdout } = await cli(['audit', '--json', ...database.args]);
      const trail = entries(stdout);
      assert.deepEqual(
        trail.map(({ action, plantId, tokenId: by, requestId, before, after }) => ({
          action,
          plantId,
          by,
          requestId,
          before,
          after,
        })),
        [
          {
            action: 'create',
            plantId: id,
            by: tokenId,
            requestId: 'req-create',
            before: null,
            after: { id, name: 'Fern', tag: 'green' },
          },
          {
            action: 'update',
            plantId: id,
            by: tokenId,
            requestId: 'req-update',
            before: { id, name: 'Fern', tag: 'green' },
            after: { id, name: 'Fern' },
          },
          {
            action: 'delete',
            plantId: id,
            by: tokenId,
            requestId: deleted.headers['x-request-id'],
            before: { id, name: 'Fern' },
            after: null,
          },
        ],
      );
      for (const entry of trail)
        assert.ok(Math.abs(Date.parse(entry.at) - Date.now()) < 60_000, entry.at);

      const text = await cli(['audit', ...database.args]);
      const lines = text.stdout.trimEnd().split('\n');
      assert.equal(lines.length, 3);
      assert.match(
        lines[2]!,
        new RegExp(
          `^3  \\S+Z  delete  plant=${id}  token=${tokenId}  request=\\S+  before=\\{"id":${id},"name":"Fern"\\}  after=-$`,
        ),
      );
    });

    it('escapes terminal controls in names for people, and keeps them exact in --json', async (t) => {
      const { call, database } = await setup(t);
      // C1 CSI, ESC, a right-to-left override, a line separator and a tab: each would act on
      // the terminal of an operator reading the trail.
      const name = 'Fern\u009b2J\u001b[31mred\u202Eevil\u2028\t';
      const created = await call({
        method: 'POST',
        url: '/plants',
        json: JSON.stringify({ id: 1, name, tag: 'x\u009b' }),
      });
      assert.equal(created.statusCode, 201, created.body);

      const text = (await cli(['audit', ...database.args])).stdout;
      assert.equal(text.split('\n').length, 2, text);
      assert.doesNotMatch(text.slice(0, -1), /[\p{Cc}\p{Cf}\u2028\u2029]/u);
      assert.ok(
        text.includes(
          'after={"id":1,"name":"Fern\\u{9b}2J\\u001b[31mred\\u{202e}evil\\u{2028}\\t","tag":"x\\u{9b}"}\n',
        ),
        text,
      );

      const [entry] = entries((await cli(['audit', '--json', ...database.args])).stdout);
      assert.deepEqual(entry?.after, { id: '1', name, tag: 'x\u009b' });
    });

    it('--plant and --since narrow the trail', async (t) => {
      const { call, database } = await setup(t);
      for (const id of [1, 2, 3])
        await call({ method: 'POST', url: '/plants', json: `{"id":${id},"name":"p"}` });
      await call({ method: 'DELETE', url: '/plants/2' });
      const ofTwo = entries(
        (await cli(['audit', '--json', '--plant', '2', ...database.args])).stdout,
      );
      assert.deepEqual(
        ofTwo.map((e) => e.action),
        ['create', 'delete'],
      );
      const recent = entries(
        (await cli(['audit', '--json', '--since', '1h', ...database.args])).stdout,
      );
      assert.equal(recent.length, 4);
      const future = await cli(['audit', '--since', '2999-01-01', ...database.args]);
      assert.equal(future.stdout, '');
    });

    it('refuses a malformed --since or --plant with a usage error', async (t) => {
      const { database } = await setup(t);
      await assert.rejects(
        cli(['audit', '--since', 'yesterday', ...database.args]),
        /is neither a date-time/,
      );
      await assert.rejects(
        cli(['audit', '--since', '2026-11-21T08:00:00', ...database.args]),
        /is neither/,
      );
      await assert.rejects(
        cli(['audit', '--plant', '007', ...database.args]),
        /the plant id is written without leading zeros: 7, not 007/,
      );
    });
  });

  describe('an empty merge patch', () => {
    it('changes nothing and records nothing, If-Match still applying', async (t) => {
      const { app, store, token } = await setup(t);
      const request = (method: string, url: string, json?: string, ifMatch?: string) =>
        app.inject({
          method: method as 'GET',
          url,
          headers: {
            authorization: `Bearer ${token}`,
            ...(json !== undefined && { 'content-type': 'application/merge-patch+json' }),
            ...(ifMatch !== undefined && { 'if-match': ifMatch }),
          },
          ...(json !== undefined && { payload: json }),
        });
      const plant = '{"id":1,"name":"Fern","tag":"green"}';
      const created = await app.inject({
        method: 'POST',
        url: '/plants',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: plant,
      });
      assert.equal(created.statusCode, 201, created.body);
      const etag = String(created.headers.etag);

      for (const ifMatch of [undefined, etag, '*', `"other", ${etag}`]) {
        const res = await request('PATCH', '/plants/1', '{}', ifMatch);
        assert.equal(res.statusCode, 200, `${ifMatch}: ${res.body}`);
        assert.equal(res.body, `${plant}\n`);
        assert.equal(res.headers.etag, etag);
      }
      const stale = await request('PATCH', '/plants/1', '{}', '"other"');
      assert.equal(stale.statusCode, 412, stale.body);
      assert.equal(errorOf(stale), 41201);
      for (const ifMatch of [undefined, '*', etag]) {
        const missing = await request('PATCH', '/plants/2', '{}', ifMatch);
        assert.equal(missing.statusCode, 404, `${ifMatch}: ${missing.body}`);
        assert.equal(errorOf(missing), 40401);
      }

      const trail = await store.audit.list({ limit: 10 });
      assert.deepEqual(
        trail.map((entry) => entry.action),
        ['create'],
      );
      assert.equal((await request('GET', '/plants/1')).body, `${plant}\n`);
    });
  });
});
