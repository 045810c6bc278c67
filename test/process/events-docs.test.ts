import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { cli, ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The shell examples of docs/events.md run as they are written, one after the other, against
// a real `plantstore serve` on a new SQLite database, the address being the only thing changed
// (and a token with events:read given as $TOKEN): each prints what its comments say, in that
// order, `...` standing for anything. The streams and `events tail` run until Ctrl-C: they are
// stopped after 4 s.

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
      const output = await new Promise<string>((resolve, reject) => {
        execFile(
          'timeout',
          ['4', 'bash', '-c', `set -eo pipefail\n${runnable}`],
          {
            cwd: ROOT,
            env: { PATH: process.env.PATH, TOKEN: token, PLANTSTORE_URL: server.url },
          },
          (error, stdout, stderr) =>
            // 124: stopped by `timeout`, as Ctrl-C would stop it.
            error && error.code !== 124
              ? reject(new Error(`${heading}: ${error.message}${stderr}`))
              : resolve(stdout),
        );
      });
      const lines = output.replaceAll('\r', '').split('\n');
      let at = 0;
      for (const line of promised(script)) {
        const found = lines.findIndex((actual, i) => i >= at && line.test(actual));
        assert.ok(found >= 0, `${heading}: no line ${line} after line ${at} of:\n${output}`);
        at = found + 1;
      }
    }
  },
);
