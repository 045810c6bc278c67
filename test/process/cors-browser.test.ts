import assert from 'node:assert/strict';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { launchChromium, skipWithoutChromium } from '../helpers/chromium.js';
import { cli, type LogLine, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// CORS as a browser enforces it: a page on one origin calls `plantstore serve
// --cors-origins <that origin>` on another; a page on an origin not listed cannot.

const skip = skipWithoutChromium('CORS is not checked in a browser');

// The page's own script, as plain JavaScript: functions passed to page.evaluate() would be
// transpiled by tsx, with helpers the page does not have.
const PAGE_SCRIPT = `
async function read(res, names) {
  const headers = Object.fromEntries(names.map((name) => [name, res.headers.get(name)]));
  return { status: res.status, headers, body: await res.text() };
}

// Authorization, a JSON body, If-Match and PATCH each need a preflight.
async function useApi(api, token) {
  const auth = { Authorization: 'Bearer ' + token };
  const created = await read(
    await fetch(api + '/plants', {
      method: 'POST',
      headers: { ...auth, 'Content-Type': 'application/json', 'X-Request-Id': 'page-1' },
      body: '{"id":7,"name":"Fern"}',
    }),
    ['location', 'etag', 'x-request-id'],
  );
  const patched = await read(
    await fetch(api + '/plants/7', {
      method: 'PATCH',
      headers: {
        ...auth,
        'Content-Type': 'application/merge-patch+json',
        'If-Match': created.headers.etag,
      },
      body: '{"tag":"shade"}',
    }),
    ['etag'],
  );
  const refused = await read(
    await fetch(api + '/plants/7', { headers: { Authorization: 'Bearer pst_unknown' } }),
    ['www-authenticate'],
  );
  const missing = await read(await fetch(api + '/plants/8', { method: 'DELETE', headers: auth }), []);
  return { created, patched, refused, missing };
}

async function attempt(url, init) {
  return fetch(url, init).then((res) => 'answered ' + res.status, (error) => error.name);
}

async function tryApi(api, token) {
  return {
    // Preflighted: the preflight is refused, so the POST is never sent.
    post: await attempt(api + '/plants', {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
      body: '{"id":8,"name":"Stranger"}',
    }),
    // Not preflighted: sent and answered, but the page may not read the answer.
    simple: await attempt(api + '/healthz'),
  };
}
`;

/** A server of one page with PAGE_SCRIPT, on an origin of its own (its own port). */
async function pageOrigin(t: TestContext): Promise<string> {
  const server: HttpServer = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(`<!doctype html><title>page</title><script>${PAGE_SCRIPT}</script>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface Seen {
  status: number;
  headers: Record<string, string | null>;
  body: string;
}

/** The functions PAGE_SCRIPT defines on the page's window. */
interface Page {
  useApi(
    api: string,
    token: string,
  ): Promise<Record<'created' | 'patched' | 'refused' | 'missing', Seen>>;
  tryApi(api: string, token: string): Promise<{ post: string; simple: string }>;
}

test('pages on the allowed origin use the API; pages on others cannot', { skip }, async (t) => {
  const browser = await launchChromium(t);
  const allowed = await pageOrigin(t);
  const other = await pageOrigin(t);
  const db = join(makeTempDir(t), 'cors.db');
  const token = (await cli(['token', 'create', '--db', db])).stdout.trim();
  const api = await startServer(t, ['--db', db, '--cors-origins', allowed]);

  const page = await browser.newPage();
  await page.goto(`${allowed}/`);
  const { created, patched, refused, missing } = await page.evaluate(
    ([url, bearer]) => (globalThis as unknown as Page).useApi(url, bearer),
    [api.url, token] as const,
  );
  assert.equal(created.status, 201, created.body);
  assert.equal(created.headers.location, '/plants/7');
  assert.match(created.headers.etag ?? '', /^".+"$/);
  assert.equal(created.headers['x-request-id'], 'page-1');
  assert.equal(patched.status, 200, patched.body);
  assert.equal(patched.body, '{"id":7,"name":"Fern","tag":"shade"}\n');
  assert.notEqual(patched.headers.etag, created.headers.etag);
  // Errors are readable too: status, challenge and Error body.
  assert.equal(refused.status, 401);
  assert.match(refused.headers['www-authenticate'] ?? '', /error="invalid_token"/);
  assert.match(refused.body, /^\{"error":40101,/);
  assert.equal(missing.status, 404);
  assert.match(missing.body, /^\{"error":40401,/);

  const stranger = await browser.newPage();
  await stranger.goto(`${other}/`);
  const blocked = await stranger.evaluate(
    ([url, bearer]) => (globalThis as unknown as Page).tryApi(url, bearer),
    [api.url, token] as const,
  );
  assert.deepEqual(blocked, { post: 'TypeError', simple: 'TypeError' });
  const check = await fetch(`${api.url}/plants/8`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(check.status, 404, 'the refused POST never reached the API');
  await check.text();
  // Log lines arrive through a pipe, possibly after the answers: wait for them.
  const preflight = (status: number) => (line: LogLine) =>
    line.method === 'OPTIONS' && line.status === status;
  await api.waitForLog(preflight(204), 'a 204 preflight');
  await api.waitForLog(preflight(403), 'a 403 preflight');
});
