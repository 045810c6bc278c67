import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { parseJson } from '../../src/api/json.js';
import { forEachBackend, type TestDatabase } from '../helpers/backends.js';
import { readEvents } from '../helpers/event-stream.js';
import { cli, startServer } from '../helpers/server-process.js';

// Issue 26, item 2: no event skipped, ever. Writers on two instances of one PostgreSQL
// database (and on the two workers of `serve --workers 2` on one SQLite file) while readers page
// and stream on every instance at once: every reader sees every event exactly once, in
// position order. And a write on one instance reaches the streams of the other within about
// 100 ms. Real processes, built from dist/ (npm run build).

interface PageEvent {
  position: bigint;
  type: string;
  data: { id: bigint; name: string };
}

/**
 * The servers of the test: two instances, or one with two workers on one port; and the
 * processes that answered requests of `method`, by the pid of their request lines.
 */
async function servers(t: TestContext, db: TestDatabase) {
  const args = db.args;
  const started =
    db.dialect === 'sqlite'
      ? [await startServer(t, [...args, '--workers', '2', '--durability', 'process'])]
      : [await startServer(t, args), await startServer(t, args)];
  const urls = [started[0]!.url, started.at(-1)!.url];
  const answering = (method: string) =>
    new Set(
      started
        .flatMap((server) =>
          server.logs.filter((line) => line.msg === 'request' && line.method === method),
        )
        .map((line) => line.pid),
    ).size;
  return { urls, answering };
}

async function token(db: TestDatabase): Promise<string> {
  const scopes = 'plants:read,plants:write,events:read';
  const { stdout } = await cli(['token', 'create', ...db.args, '--scopes', scopes]);
  return stdout.trim();
}

async function send(url: string, token: string, method: string, body?: string): Promise<unknown> {
  const res = await fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body }),
  });
  const text = await res.text();
  assert.ok(res.ok, `${method} ${url}: ${res.status} ${text}`);
  return text === '' ? undefined : parseJson(text);
}

/** Pages through the feed with small pages and long polls until it has `total` events. */
async function page(base: string, token: string, total: () => number | undefined) {
  const seen: PageEvent[] = [];
  let next = '/events?limit=7&wait=1s';
  while (seen.length !== total()) {
    const res = await fetch(`${base}${next}`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.status, 200);
    seen.push(...(parseJson(await res.text()) as PageEvent[]));
    next = /^<([^>]+)>/.exec(res.headers.get('link')!)![1]!;
    assert.ok(total() === undefined || seen.length <= total()!, 'no event twice');
  }
  return seen.map((event) => ({ position: event.position, type: event.type, id: event.data.id }));
}

describe('the events proof', () => {
  forEachBackend({ timeout: 180_000 }, (backend) => {
    it('writers on two processes, readers paging and streaming on both: every event once, in order', async (t) => {
      const db = await backend.fresh(t);
      const { urls, answering } = await servers(t, db);
      const auth = await token(db);
      const writers = 6;
      const perWriter = 25;
      // Each writer creates, renames every other plant and deletes every third: three kinds.
      const writes = writers * (perWriter + Math.ceil(perWriter / 2) + Math.ceil(perWriter / 3));
      const known: { total?: number } = {};

      const streams = await Promise.all(
        [0, 1, 0, 1].map((i) => readEvents(t, `${urls[i]}/events`, auth)),
      );
      const streamed = streams.map(async (stream) =>
        (await stream.take(writes, 120_000)).map((event) => ({
          position: BigInt(event.id),
          type: event.event,
          id: (parseJson(event.data) as { id: bigint }).id,
        })),
      );
      const paged = [0, 1, 0, 1].map((i) => page(urls[i]!, auth, () => known.total));
      await Promise.all(
        Array.from({ length: writers }, async (_, w) => {
          for (let i = 0; i < perWriter; i++) {
            const base = urls[(w + i) % 2]!;
            const plant = (await send(`${base}/plants`, auth, 'POST', `{"name":"w${w}-${i}"}`)) as {
              id: bigint;
            };
            if (i % 2 === 0) {
              await send(`${base}/plants/${plant.id}`, auth, 'PATCH', `{"name":"w${w}-${i}!"}`);
            }
            if (i % 3 === 0)
              await send(`${urls[(w + i + 1) % 2]}/plants/${plant.id}`, auth, 'DELETE');
          }
        }),
      );
      known.total = writes;

      const log = await page(urls[0]!, auth, () => writes);
      const positions = log.map((event) => event.position);
      assert.deepEqual(
        positions,
        [...positions].sort((a, b) => (a < b ? -1 : 1)),
        'in position order',
      );
      assert.equal(new Set(positions).size, writes, 'each once');
      const kinds = (type: string) => log.filter((event) => event.type === type).length;
      assert.deepEqual(
        [kinds('plant.created'), kinds('plant.updated'), kinds('plant.deleted')],
        [
          writers * perWriter,
          writers * Math.ceil(perWriter / 2),
          writers * Math.ceil(perWriter / 3),
        ],
      );
      const readers = [...(await Promise.all(paged)), ...(await Promise.all(streamed))];
      for (const [i, seen] of readers.entries()) {
        assert.deepEqual(seen, log, `reader ${i} saw every event once, in position order`);
      }
      t.diagnostic(`${readers.length} readers each saw the ${writes} events in the same order`);
      assert.equal(answering('POST'), 2, 'both processes wrote');
      assert.equal(answering('GET'), 2, 'both processes served pages');
    });

    it('a write on one process reaches a stream on the other in about 100 ms', async (t) => {
      const db = await backend.fresh(t);
      const { urls } = await servers(t, db);
      const auth = await token(db);
      // On SQLite both are the one port: streams on several connections land on both workers.
      const streams = await Promise.all(
        [1, 1, 1, 1].map((i) => readEvents(t, `${urls[i]}/events`, auth)),
      );
      const lags: number[] = [];
      for (let i = 0; i < 20; i++) {
        const begun = performance.now();
        await send(`${urls[0]}/plants`, auth, 'POST', `{"name":"lag ${i}"}`);
        const arrived = await Promise.all(
          streams.map(async (stream) => {
            await stream.take(1);
            return performance.now() - begun;
          }),
        );
        lags.push(...arrived);
      }
      lags.sort((a, b) => a - b);
      const p50 = lags[Math.floor(lags.length / 2)]!;
      const p99 = lags[Math.floor(lags.length * 0.99)]!;
      t.diagnostic(
        `from a create's request to the event on a stream: p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms`,
      );
      assert.ok(p50 < 150, `p50 ${p50} ms`);
    });
  });
});
