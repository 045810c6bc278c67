import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runWrk, type LoadSpec, type WrkResult, wrkSkip } from '../harness/wrk.js';

// The benchmark's load generator as it runs: wrk with bench/harness/load.lua against a server
// that records what it gets. Needs wrk (CI installs it): skipped without, and says so; under CI=true, fails.

const SKIP = wrkSkip('the load generator test');

interface Seen {
  method: string;
  path: string;
  authorization: string;
  contentType: string | undefined;
  idempotencyKey: string | undefined;
  body: string;
}

describe('wrk with bench/harness/load.lua', { skip: SKIP }, () => {
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const { method = '', url = '', headers } = req;
      seen.push({
        method,
        path: url,
        authorization: headers.authorization ?? '',
        contentType: headers['content-type'],
        idempotencyKey: headers['idempotency-key'] as string | undefined,
        body,
      });
      // Every seventh answer is a 404, for the error count.
      res.writeHead(seen.length % 7 === 0 ? 404 : 204).end();
    });
  });
  const dir = mkdtempSync(join(tmpdir(), 'bench-wrk-'));
  const tokensFile = join(dir, 'tokens');
  let url = '';

  before(async () => {
    writeFileSync(tokensFile, 'tok_a\ntok_b\ntok_c\n');
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function load(spec: LoadSpec, plants: number, start: number): Promise<WrkResult> {
    seen.length = 0;
    return runWrk({
      url,
      connections: 1,
      seconds: 1,
      tokensFile,
      load: spec,
      plants,
      start,
      seed: 7,
    });
  }

  it('walks distinct ids from start + 1, wrapping at plants, tokens in turn', async () => {
    const result = await load({ mode: 'walk', method: 'DELETE', path: '/plants/{id}' }, 4, 1);
    assert.ok(result.requests > 10, `${result.requests} requests`);
    assert.ok(result.sent >= seen.length && seen.length >= result.requests);
    const ids = seen.slice(0, 6).map((s) => s.path);
    assert.deepEqual(ids, [
      '/plants/2',
      '/plants/3',
      '/plants/4',
      '/plants/1',
      '/plants/2',
      '/plants/3',
    ]);
    assert.ok(seen.every((s) => s.method === 'DELETE'));
    const tokens = new Set(seen.map((s) => s.authorization));
    assert.deepEqual([...tokens].sort(), ['Bearer tok_a', 'Bearer tok_b', 'Bearer tok_c']);
    assert.notEqual(seen[0]!.authorization, seen[1]!.authorization);
  });

  it('counts answers above 399 as status errors, and its own CPU time', async () => {
    const result = await load({ mode: 'walk', method: 'DELETE', path: '/plants/{id}' }, 1e9, 0);
    assert.ok(Math.abs(result.status - Math.floor(result.requests / 7)) <= 1, `${result.status}`);
    assert.ok(result.cpuSeconds > 0 && result.cpuSeconds < 2, `${result.cpuSeconds}`);
    assert.ok(result.p99us >= result.p50us && result.p50us > 0);
  });

  it('sends a JSON body, and random ids within 1..plants', async () => {
    const body = '{"name":"Bench plant"}';
    await load({ mode: 'static', method: 'POST', path: '/plants', body }, 10, 0);
    assert.ok(seen.length > 0);
    assert.ok(seen.every((s) => s.path === '/plants' && s.body === body));
    assert.equal(seen[0]!.contentType, 'application/json');
    await load({ mode: 'random', method: 'GET', path: '/plants/{id}' }, 5, 0);
    const ids = new Set(seen.map((s) => Number(s.path.slice('/plants/'.length))));
    assert.deepEqual([...ids].sort(), [1, 2, 3, 4, 5]);
    assert.ok(seen.every((s) => s.idempotencyKey === undefined));
  });

  it('gives every request an Idempotency-Key of its own, in keyed mode, across turns', async () => {
    const body = '{"name":"Bench plant"}';
    const keys: string[] = [];
    for (let turn = 0; turn < 2; turn++) {
      await load({ mode: 'keyed', method: 'POST', path: '/plants', body }, 10, 0);
      assert.ok(seen.length > 10);
      assert.ok(seen.every((s) => s.path === '/plants' && s.body === body));
      keys.push(...seen.map((s) => s.idempotencyKey ?? ''));
    }
    assert.ok(
      keys.every((key) => /^[0-9]+-7-[0-9]+$/.test(key)),
      keys[0],
    );
    assert.equal(new Set(keys).size, keys.length);
  });
});
