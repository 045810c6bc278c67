import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { chromium } from 'playwright-core';
import { setup } from '../helpers/setup.js';

const CHROMIUM = '/usr/bin/chromium';
const skip = existsSync(CHROMIUM)
  ? false
  : `SKIPPED: ${CHROMIUM} is missing (apt-get install chromium); /docs is not checked in a browser`;
if (skip) console.warn(`\n*** docs-browser.test.ts ${skip} ***\n`);

test('/docs renders the interactive reference from local assets only', { skip }, async (t) => {
  const { app } = await setup(t);
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  t.after(() => browser.close());
  const page = await browser.newPage();
  const elsewhere: string[] = [];
  // Any request that leaves the server (a CDN, fonts, telemetry) is recorded and refused.
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(base) || url.startsWith('data:')) return route.continue();
    elsewhere.push(url);
    return route.abort();
  });
  const failures: string[] = [];
  page.on('pageerror', (error) => failures.push(error.message));

  await page.goto(`${base}/docs`);
  const deleteOperation = page.locator('.opblock-delete .opblock-summary-path', {
    hasText: '/plants/{id}',
  });
  await deleteOperation.waitFor({ timeout: 15_000 });
  assert.equal(await page.locator('.opblock').count(), 17, 'every operation and preflight');
  assert.ok(await page.locator('button.authorize').isVisible(), 'the bearer token can be entered');
  assert.deepEqual(elsewhere, []);
  assert.deepEqual(failures, []);
});
