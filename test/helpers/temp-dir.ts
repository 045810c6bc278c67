import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cleanups } from './cleanups.js';

/** A new temporary directory, removed with everything in it when the test ends. */
export function makeTempDir(t: Cleanups): string {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
