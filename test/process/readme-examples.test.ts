import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { cli, ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The curl examples of the README and of docs/api.md, run as they are written against a real
// `plantstore serve` on a new SQLite database (what `npm start` serves), the address being
// the only thing changed: each call answers the status its comment promises.

const CURL = spawnSync('curl', ['--version']).status === 0;
const SKIP = CURL ? false : 'curl is not installed: the documented examples cannot run';

/** The first ```sh block after `heading` in `file`. */
function example(file: string, heading: string): string {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const at = text.indexOf(`\n${heading}\n`);
  assert.ok(at >= 0, `${file} has no heading ${heading}`);
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(at));
  assert.ok(block, `${file} has no sh block under ${heading}`);
  return block[1]!;
}

/** Runs `script` in bash against a fresh server; answers its output. */
async function runAgainstServer(t: TestContext, script: string): Promise<string> {
  const db = join(makeTempDir(t), 'examples.db');
  const server = await startServer(t, ['--db', db]);
  const token = (await cli(['token', 'create', '--db', db])).stdout.trim();
  // The token the example takes from the default database is this server's, in TOKEN.
  const runnable = script
    .replace(/^TOKEN=\$\(\.\/bin\/plantstore token create\)\n/m, '')
    .replaceAll('http://127.0.0.1:8080', server.url);
  assert.notEqual(runnable, script, 'the example calls http://127.0.0.1:8080');
  return await new Promise((resolve, reject) => {
    execFile(
      'bash',
      ['-c', `set -eo pipefail\n${runnable}`],
      { env: { PATH: process.env.PATH, TOKEN: token } },
      (error, stdout, stderr) =>
        error ? reject(new Error(`${error.message}${stderr}`)) : resolve(stdout),
    );
  });
}

const statuses = (output: string) =>
  [...output.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));

/**
 * Every body `curl -i` printed ended with a newline: each status line begins a line, and so
 * does what follows the last body (the shell's prompt, in a terminal).
 */
function assertBodiesEndLines(output: string): void {
  assert.deepEqual(
    [...output.matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((match) => Number(match[1])),
    statuses(output),
    'a body without a final newline runs into the next status line',
  );
  assert.ok(
    output.endsWith('\n'),
    `the last body ends its line: ${JSON.stringify(output.slice(-40))}`,
  );
}

describe('the documented curl examples do what their comments say', { skip: SKIP }, () => {
  it('README.md, Calling the API: every operation once', async (t) => {
    const output = await runAgainstServer(t, example('README.md', '## Calling the API'));
    assert.deepEqual(
      statuses(output),
      [201, 201, 200, 200, 200, 200, 200, 412, 201, 201, 204, 404],
    );
    assert.match(output, /^location: \/plants\/1\r$/m);
    assert.match(output, /^link: <\/plants\?limit=1&after=1&tag=shade>; rel="next"\r$/m);
    assert.match(output, /"error":41201/);
    assert.equal(output.match(/^idempotent-replayed: true\r$/gm)?.length, 1);
    assertBodiesEndLines(output);
  });

  it('docs/api.md, Conditional writes: If-Match, If-None-Match', async (t) => {
    const output = await runAgainstServer(t, example('docs/api.md', '## Conditional writes'));
    assert.deepEqual(statuses(output), [304, 200, 412, 204]);
    assert.match(output, /"error":41201/);
    assertBodiesEndLines(output);
  });

  it('docs/api.md, Idempotent creates: Idempotency-Key', async (t) => {
    const output = await runAgainstServer(t, example('docs/api.md', '## Idempotent creates'));
    assert.deepEqual(statuses(output), [201, 201, 422]);
    assert.equal(output.match(/^idempotent-replayed: true\r$/gm)?.length, 1);
    assert.match(output, /"error":42201/);
    assertBodiesEndLines(output);
  });
});
