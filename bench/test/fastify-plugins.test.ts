import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { copyDatabase } from '../phases/contenders.js';
import { seedSqlite } from '../data/seed.js';
import { type Server, startServer, stop } from '../harness/servers.js';

// The benchmark's Fastify-plugins yardstick (bench/yardsticks/fastify-plugins.ts) must give
// the answers of the minimal Fastify yardstick, status, body and Link, refusals included,
// with the plugins' headers on top: the ratio to it measures plantstore against the plugins.

describe('the fastify-plugins yardstick', () => {
  let minimal: Server;
  let plugins: Server;
  let token = '';
  const dir = mkdtempSync(join(tmpdir(), 'bench-fastify-plugins-'));

  before(async () => {
    const seeded = join(dir, 'seeded.db');
    const tokensFile = join(dir, 'tokens');
    await seedSqlite(seeded, 40, tokensFile);
    token = readFileSync(tokensFile, 'utf8').split('\n')[0]!;
    const cores = '0-1';
    [minimal, plugins] = await Promise.all([
      startServer('fastify', { kind: 'fastify-sqlite', db: copyDatabase(seeded, dir, 'a') }, cores),
      startServer(
        'plugins',
        { kind: 'fastify-plugins', db: copyDatabase(seeded, dir, 'b') },
        cores,
      ),
    ]);
  });
  after(async () => {
    await Promise.all([minimal, plugins].filter(Boolean).map(stop));
    rmSync(dir, { recursive: true, force: true });
  });

  const ask = async (server: Server, method: string, path: string, o: RequestOptions = {}) => {
    const headers: Record<string, string> = {};
    if (o.auth !== null) headers.authorization = o.auth ?? `Bearer ${token}`;
    if (o.body !== undefined) headers['content-type'] = o.type ?? 'application/json';
    const res = await fetch(server.url + path, { method, headers, body: o.body });
    return { status: res.status, body: await res.text(), headers: res.headers };
  };

  interface RequestOptions {
    /** The Authorization header; null for none. */
    auth?: string | null;
    body?: string;
    type?: string;
  }

  const requests: [string, string, RequestOptions?][] = [
    ['GET', '/plants/12'],
    ['GET', '/plants/4000'],
    ['GET', '/plants/012'],
    ['GET', '/plants?limit=10'],
    ['GET', '/plants?tag=shade&limit=3&after=4'],
    ['GET', '/plants?limit=0'],
    ['POST', '/plants', { body: '{"name":"Bench plant","tag":"shade"}' }],
    ['POST', '/plants', { body: '{"name":""}' }],
    ['POST', '/plants', { body: '{"name":' }],
    ['POST', '/plants', { body: 'name=x', type: 'text/plain' }],
    ['DELETE', '/plants/40'],
    ['DELETE', '/plants/40'],
    ['GET', '/plants/1', { auth: null }],
    ['GET', '/plants/1', { auth: 'Bearer unknown' }],
    ['GET', '/nowhere'],
  ];

  it('answers every request as the minimal Fastify yardstick does', async () => {
    for (const [method, path, o] of requests) {
      const want = await ask(minimal, method, path, o);
      const got = await ask(plugins, method, path, o);
      const what = `${method} ${path} ${JSON.stringify(o ?? {})}`;
      assert.equal(got.status, want.status, what);
      assert.equal(got.body, want.body, what);
      assert.equal(got.headers.get('link'), want.headers.get('link'), what);
      assert.equal(got.headers.get('location'), want.headers.get('location'), what);
    }
    assert.equal((await fetch(`${plugins.url}/healthz`)).status, 200);
  });

  it("carries the plugins' headers", async () => {
    const { headers } = await ask(plugins, 'GET', '/plants/12');
    assert.match(headers.get('etag') ?? '', /^"/);
    assert.equal(headers.get('x-ratelimit-limit'), '100000');
    assert.equal(headers.get('x-content-type-options'), 'nosniff');
    assert.equal(headers.get('access-control-allow-origin'), '*');
  });
});
