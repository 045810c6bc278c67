import { existsSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestContext } from 'node:test';
import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`); playwright-core downloads no browser. */
export const CHROMIUM = '/usr/bin/chromium';

/** The `skip` of a browser test: a reason when Chromium is missing, else false (and it runs). */
export function skipWithoutChromium(unchecked: string): string | false {
  if (existsSync(CHROMIUM)) return false;
  const reason = `SKIPPED: ${CHROMIUM} is missing (apt-get install chromium); ${unchecked}`;
  console.warn(`\n*** ${reason} ***\n`);
  return reason;
}

/** How long a closing Chromium may take before it is killed. */
const CLOSE_WITHIN_MS = 15_000;

/**
 * Chromium for one test, closed when it ends. Launch it before the servers it will visit: hooks
 * run in the order they were registered, so the browser, and every connection it holds, is gone
 * before they close.
 *
 * Launched as a server and connected to, so that it can be killed: `Browser.close()` of a
 * Chromium that does not exit waits for ever (a CI run lost its whole file timeout there).
 */
export async function launchChromium(t: TestContext): Promise<Browser> {
  const server = await chromium.launchServer({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    timeout: 60_000,
  });
  t.after(async () => {
    const closed = server.close().then(() => true);
    const late = delay(CLOSE_WITHIN_MS, false, { ref: false });
    if (!(await Promise.race([closed, late]))) {
      t.diagnostic(`Chromium had not closed ${CLOSE_WITHIN_MS} ms after close(): killed`);
      await server.kill();
    }
  });
  return chromium.connect(server.wsEndpoint());
}
