import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { cli, ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The shell examples of docs/events.md run as they are written, one after the other, against
// a real `plantstore serve` on a new SQLite database, the address being the only thing changed
// (and a token with events:read given as $TOKEN): each prints what its comments say, in that
// order, `...` standing for anything. The streams and `events tail` run until Ctrl-C: each is
// stopped, as Ctrl-C stops it, once it has printed what its comments promise.

const CURL = spawnSync('curl', ['--version']).status === 0;
const PAGE = join(ROOT, 'docs', 'events.md');

/** The sh blocks under each `## ` heading, in order, but the first (it makes the token). */
function examples(): { heading: string; script: string }[] {
  const text = readFileSync(PAGE, 'utf8');
  const found: { heading: string; script: string }[] = [];
  let heading = '';
  for (const part of text.split(/^(## .*)$/m)) {
    if (part.startsWith('## ')) heading = part;
    else {
      for (const block of part.matchAll(/```sh\n([\s\S]*?)```/g)) {
        found.push({ heading, script: block[1]! });
      }
    }
  }
  assert.match(found[0]!.script, /token create/);
  return found.slice(1);
}

/** The output the comments of a block promise, one line each; `...` is anything. */
function promised(script: string): RegExp[] {
  return script
    .split('\n')
    .filter((line) => line.startsWith('#'))
    .map((line) => line.replace(/^# ?/, ''))
    .filter((line) => line !== '...' && line !== '')
    .map(
      (line) =>
        new RegExp(
          `^${line
            .split('...')
            .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
            .join('.*')}$`,
        ),
    );
}

/** Whether `output` has a line for each of `lines`, in order. */
function printedAll(output: string, lines: RegExp[]): boolean {
  const printed = output.replaceAll('\r', '').split('\n');
  let at = 0;
  for (const line of lines) {
    const found = printed.findIndex((actual, i) => i >= at && line.test(actual));
    if (found < 0) return false;
    at = found + 1;
  }
  return true;
}

/**
 * Runs a block in bash until it exits, or, for one that streams until Ctrl-C, until it has
 * printed every promised line: then it is stopped (its process group, as Ctrl-C stops it).
 * Fails when it exits with an error, or prints less within 30 s.
 */
function runUntilPrinted(
  script: string,
  lines: RegExp[],
  env: Record<string, string>,
  heading: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', `set -eo pipefail\n${script}`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, ...env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let stopped = false;
    const stop = () => {
      stopped = true;
      try {
        process.kill(-child.pid!, 'SIGINT');
      } catch {
        // Gone already.
      }
    };
    const deadline = setTimeout(stop, 30_000);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (!stopped && printedAll(stdout, lines)) stop();
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(deadline);
      if (code === 0 || (stopped && printedAll(stdout, lines))) resolve(stdout);
      else
        reject(
          new Error(`${heading}: exit ${code}${stopped ? ' (stopped)' : ''}\n${stdout}${stderr}`),
        );
    });
  });
}

test(
  'docs/events.md: the examples print what they say',
  { skip: CURL ? false : 'no curl' },
  async (t) => {
    const db = join(makeTempDir(t), 'events.db');
    const server = await startServer(t, ['--db', db]);
    const scopes = 'plants:read,plants:write,events:read';
    const token = (await cli(['token', 'create', '--db', db, '--scopes', scopes])).stdout.trim();
    const blocks = examples();
    assert.ok(blocks.length >= 5, `${blocks.length} examples`);
    for (const { heading, script } of blocks) {
      const runnable = script.replaceAll('http://127.0.0.1:8080', server.url);
      const lines = promised(script);
      const output = await runUntilPrinted(
        runnable,
        lines,
        { TOKEN: token, PLANTSTORE_URL: server.url },
        heading,
      );
      const printed = output.replaceAll('\r', '').split('\n');
      let at = 0;
      for (const line of lines) {
        const found = printed.findIndex((actual, i) => i >= at && line.test(actual));
        assert.ok(found >= 0, `${heading}: no line ${line} after line ${at} of:\n${output}`);
        at = found + 1;
      }
    }
  },
);
