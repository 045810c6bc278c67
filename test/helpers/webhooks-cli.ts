import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { Run } from './plants-cli.js';
import { cleanEnv, cli, ROOT, startServer } from './server-process.js';
import { makeTempDir } from './setup.js';
import { ALLOW_LOOPBACK, webhookToken } from './webhook-harness.js';

// `plantstore webhooks ...` as a user runs it, for the suites of real CLI processes.

/** Runs `plantstore webhooks <args>` to its end, whatever its exit code. */
export function webhooks(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const base = cleanEnv();
  delete base.PLANTSTORE_URL;
  delete base.PLANTSTORE_TOKEN;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/plantstore', 'webhooks', ...args],
      { cwd: ROOT, env: { ...base, ...env } },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: number }).code ?? 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/**
 * A server on a new SQLite database that may send to loopback (`serveArgs` added), a token
 * with every scope and one with `plants:read` alone, and the environment naming the first.
 */
export async function serverForWebhooks(t: TestContext, serveArgs: string[] = []) {
  const db = ['--db', join(makeTempDir(t), 'hooks.db')];
  const token = await webhookToken(db);
  const readOnly = (await cli(['token', 'create', ...db, '--scopes', 'plants:read'])).stdout.trim();
  const server = await startServer(t, [...db, ...ALLOW_LOOPBACK, ...serveArgs]);
  const env = { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: token };
  return { env, url: server.url, token, readOnly, server };
}
