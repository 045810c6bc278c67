import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { cleanEnv, cli, ROOT, startServer } from './server-process.js';
import { makeTempDir } from './setup.js';

// `plantstore plants ...` as a user runs it, for the suites of real CLI processes.

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `plantstore plants <args>` to its end, whatever its exit code. */
export function plants(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const base = cleanEnv();
  delete base.PLANTSTORE_URL;
  delete base.PLANTSTORE_TOKEN;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/plantstore', 'plants', ...args],
      { cwd: ROOT, env: { ...base, ...env } },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: number }).code ?? 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A server on a new SQLite database, a token for it, and the environment naming both. */
export async function serverWithToken(t: TestContext) {
  const dir = makeTempDir(t);
  const db = join(dir, 'plants.db');
  const { stdout } = await cli(['token', 'create', '--db', db]);
  const server = await startServer(t, ['--db', db]);
  const env = { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: stdout.trim() };
  return { dir, env, url: server.url, token: stdout.trim(), server };
}
