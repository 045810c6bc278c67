import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { Page } from 'playwright-core';
import { buildOpenApiDocument } from '../../src/api/openapi.js';
import { operations } from '../../src/api/operations.js';
import { launchChromium, skipWithoutChromium } from '../helpers/chromium.js';
import { setup } from '../helpers/setup.js';
import { ROOT } from '../helpers/server-process.js';

const skip = skipWithoutChromium('/docs is not checked in a browser');

/** Screenshots a person can look at after the run (ignored by git). */
const ARTIFACTS = join(ROOT, '.tmp', 'artifacts');

/** /docs of a fresh app in Chromium; any request leaving the server is refused and recorded. */
async function openDocs(t: TestContext) {
  const browser = await launchChromium(t);
  const served = await setup(t);
  const base = await served.app.listen({ host: '127.0.0.1', port: 0 });
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const elsewhere: string[] = [];
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(base) || url.startsWith('data:')) return route.continue();
    elsewhere.push(url);
    return route.abort();
  });
  const failures: string[] = [];
  page.on('pageerror', (error) => failures.push(error.message));
  await page.goto(`${base}/docs`);
  await page.locator('.opblock').first().waitFor({ timeout: 15_000 });
  return { page, token: served.token, elsewhere, failures };
}

test('/docs leaves the browser console clean, with an icon of its own', { skip }, async (t) => {
  // Without the request routing of openDocs, so the page loads as in a reader's browser.
  const browser = await launchChromium(t);
  const served = await setup(t);
  const base = await served.app.listen({ host: '127.0.0.1', port: 0 });
  const page = await browser.newPage();
  const said: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') {
      said.push(`${message.text()} (${message.location().url})`);
    }
  });
  page.on('pageerror', (error) => said.push(error.message));
  await page.goto(`${base}/docs`);
  await page.locator('.opblock').first().waitFor({ timeout: 15_000 });
  // A page without an icon of its own makes a desktop browser ask for /favicon.ico, a 404 in
  // its console. Headless Chromium never asks, so what is checked is the icon: declared, and
  // an image the browser can draw. (Waiting for a favicon request that never comes, or for
  // "network idle", proves nothing and timed out on a busy CI machine.)
  // As plain JavaScript: the page's DOM has no types here, and a function would carry tsx's
  // transpiled helpers.
  const icon = await page.evaluate<string>(`(async () => {
    const link = document.querySelector('link[rel="icon"]');
    if (link === null) return 'no <link rel="icon">';
    const image = new Image();
    image.src = link.href;
    await image.decode();
    return image.naturalWidth > 0 && link.href.startsWith('data:') ? 'drawn' : link.href;
  })()`);
  assert.equal(icon, 'drawn');
  assert.deepEqual(said, []);
});

/** Authorizes with `token`, opens POST /plants and presses "Try it out"; the operation's block. */
async function tryCreate(page: Page, token: string) {
  await page.locator('button.authorize').click();
  await page.locator('.modal-ux input[type=text], .modal-ux input[type=password]').fill(token);
  await page.locator('.modal-ux button.authorize').click();
  await page.locator('.modal-ux button.btn-done').click();
  const create = page.locator('.opblock-post', { hasText: '/plants' }).first();
  await create.locator('.opblock-summary').click();
  await create.locator('button.try-out__btn').click();
  return create;
}

async function screenshot(t: TestContext, page: Page, name: string) {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, name);
  await page.screenshot({ path, fullPage: false });
  t.diagnostic(`screenshot: ${path}`);
}

test(
  '/docs opens on the operations a reader calls, from local assets only',
  { skip },
  async (t) => {
    const { page, elsewhere, failures } = await openDocs(t);
    // Neither the page's assets nor the redirects to the page are operations to read about.
    const shown = operations.filter((op) => !['/docs/{file}', '/', '/docs/'].includes(op.path));
    // Swagger UI shows the document's webhook messages as operations of their own, after them.
    const messages = Object.keys(buildOpenApiDocument().webhooks ?? {}).length;
    assert.equal(
      await page.locator('.opblock').count(),
      shown.length + messages,
      'no preflight, no asset',
    );
    assert.equal(await page.locator('.opblock-options').count(), 0);
    const first = await page.locator('.opblock').first().boundingBox();
    assert.ok(first !== null && first.y < 800, `first operation at y=${first?.y}, off the screen`);
    assert.ok(
      await page.locator('button.authorize').isVisible(),
      'the bearer token can be entered',
    );
    // The rules in full are one click away, not in the way.
    const rules = page.locator('details summary', { hasText: 'The rules in full' });
    assert.equal(await rules.count(), 1);
    await screenshot(t, page, 'docs-top.png');
    assert.deepEqual(elsewhere, []);
    assert.deepEqual(failures, []);
  },
);

test('a reader searching /docs for each webhook event finds it', { skip }, async (t) => {
  const { page, failures } = await openDocs(t);
  // What the page shows without a click: what a search in the page (Ctrl-F) finds.
  const shown = await page.locator('body').innerText();
  for (const event of ['plant.created', 'plant.updated', 'plant.deleted']) {
    assert.ok(shown.includes(event), `${event} is on the page`);
  }
  assert.deepEqual(failures, []);
});

test('a plant created through /docs shows its id digit for digit', { skip }, async (t) => {
  const { page, token, failures } = await openDocs(t);
  const create = await tryCreate(page, token);
  // 2^53 + 1: the first integer a JavaScript number cannot hold.
  await create
    .locator('textarea.body-param__text')
    .fill('{"id": 9007199254740993, "name": "Big fern"}');
  await create.locator('button.execute').click();
  const answer = create.locator('.live-responses-table .response-col_description pre').first();
  await answer.waitFor({ timeout: 15_000 });
  const text = await answer.innerText();
  await answer.scrollIntoViewIfNeeded();
  await screenshot(t, page, 'docs-created-plant.png');
  assert.match(text, /"id": 9007199254740993,/);
  assert.doesNotMatch(text, /9007199254740992/);
  assert.match(
    await create.locator('.live-responses-table tbody .response-col_status').first().innerText(),
    /^201$/,
  );
  assert.deepEqual(failures, []);
});

test(
  '"Try it out" on POST /plants offers a readable plant, and executing it as shown works',
  { skip },
  async (t) => {
    const { page, token, failures } = await openDocs(t);
    const create = await tryCreate(page, token);
    const offered = await create.locator('textarea.body-param__text').inputValue();
    assert.deepEqual(JSON.parse(offered), { name: 'Fern', tag: 'shade' });
    await create.locator('button.execute').click();
    const answer = create.locator('.live-responses-table .response-col_description pre').first();
    await answer.waitFor({ timeout: 15_000 });
    const created = JSON.parse(await answer.innerText()) as Record<string, unknown>;
    assert.deepEqual(
      { ...created, id: typeof created.id },
      { id: 'number', name: 'Fern', tag: 'shade' },
    );
    assert.notEqual(created.id, 0);
    await screenshot(t, page, 'docs-example-created.png');
    assert.deepEqual(failures, []);
  },
);
