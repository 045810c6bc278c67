import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { plants, serverWithToken } from '../helpers/plants-cli.js';
import { cleanEnv, cli, ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The plants command's paper cuts of issue #25, each as a newcomer met it: real CLI processes
// against a real server.

test('plants get 007 says what the server says, in one line, exit 2', async (t) => {
  const { env, url, token } = await serverWithToken(t);
  const answer = await fetch(`${url}/plants/007`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(answer.status, 400);
  const { message } = (await answer.json()) as { message: string };
  assert.equal(message, 'The plant id is written without leading zeros: 7, not 007.');
  const said = 'the plant id is written without leading zeros: 7, not 007';

  for (const args of [
    ['get', '007'],
    ['delete', '007'],
    ['create', '--name', 'a', '--id', '007'],
  ]) {
    const run = await plants(args, env);
    assert.equal(run.code, 2, `plants ${args.join(' ')}: ${run.stderr}`);
    assert.equal(run.stderr, `plantstore: ${said}\n`, 'one line: no usage after it');
    assert.equal(run.stdout, '');
  }
  // Neither is anything else that is not an id followed by the usage.
  const junk = await plants(['get', 'seven'], env);
  assert.equal(junk.code, 2);
  assert.equal(
    junk.stderr,
    'plantstore: the plant id must be a decimal integer from -9223372036854775808 to ' +
      '9223372036854775807, not "seven"\n',
  );
});

test('plants export says "exported 20000 plants" once, its stderr a file', async (t) => {
  const db = join(makeTempDir(t), 'many.db');
  const store = openSqliteStore({ file: db, durability: 'process' });
  await Promise.all(
    Array.from({ length: 20_000 }, (_, i) => store.plants.insert({ id: BigInt(i + 1), name: 'p' })),
  );
  await store.close();
  const token = (await cli(['token', 'create', '--db', db])).stdout.trim();
  const server = await startServer(t, ['--db', db]);
  const run = await plants(['export'], { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: token });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stdout.split('\n').length, 20_001);
  // A count each 10000 plants where no bar can be drawn, then the total: once.
  assert.equal(run.stderr, 'exported 10000 plants\nexported 20000 plants\n');
});

const SCRIPT = '/usr/bin/script';
const noTerminal = existsSync(SCRIPT) ? false : `SKIPPED: ${SCRIPT} (util-linux) is missing`;
if (noTerminal) console.warn(`\n*** plants-cli-cuts.test.ts ${noTerminal} ***\n`);

test(
  'Ctrl-C during plants import: the bar cleared, what was done, and that it resumes',
  {
    skip: noTerminal,
  },
  async (t) => {
    const dir = makeTempDir(t);
    const db = join(dir, 'import.db');
    const token = (await cli(['token', 'create', '--db', db])).stdout.trim();
    // Without an fsync at each commit, as on a fast disk: the test takes seconds.
    const server = await startServer(t, ['--db', db, '--durability', 'process']);
    const env = { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: token };
    const file = join(dir, 'in.jsonl');
    const count = 300;
    writeFileSync(file, Array.from({ length: count }, (_, i) => `{"name":"p${i}"}\n`).join(''));
    // script(1) runs the import on a pseudo-terminal; a ^C written to it is the terminal's
    // Ctrl-C: SIGINT to the import, from the terminal's line discipline.
    const command = `${process.execPath} bin/plantstore plants import ${file}`;
    const child = spawn(SCRIPT, ['-qec', command, '/dev/null'], {
      cwd: ROOT,
      env: { ...cleanEnv(), ...env },
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    t.after(() => clearTimeout(timer));
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      // Interrupted once the bar shows lines imported, thousands of lines before the end.
      if (!out.includes('imported ') && (out + chunk).includes('imported '))
        child.stdin.write('\x03');
      out += chunk;
    });
    const [code] = (await once(child, 'close')) as [number | null];
    assert.equal(code, 130, `exit code as a shell's for Ctrl-C: ${JSON.stringify(out)}`);
    const summary = new RegExp(
      `\\r\\x1b\\[K${file}: (\\d+) lines: \\1 created, 0 created by an earlier run, 0 failed\\r\\n` +
        `interrupted before line (\\d+)\\r\\n` +
        'run the same command again to go on: lines already imported are not created twice\\r\\n$',
    );
    const said = summary.exec(out);
    assert.ok(
      said !== null,
      `the bar cleared, then the summary: ${JSON.stringify(out.slice(-400))}`,
    );
    const done = Number(said[1]);
    assert.ok(done > 0 && done < count, `${done} of ${count} imported before Ctrl-C`);
    assert.equal(Number(said[2]), done + 1);

    // Running it again goes on: every line once, none twice.
    const again = await plants(['import', file, '--concurrency', '16'], env);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(
      again.stderr,
      `${file}: ${count} lines: ${count - done} created, ${done} created by an earlier run, 0 failed\n`,
    );
    const exported = await plants(['export'], env);
    assert.equal(exported.stdout.split('\n').length - 1, count);
  },
);

test('an option given twice, or with its --no- form, is refused, and nothing is sent', async (t) => {
  const { env, url, token } = await serverWithToken(t);
  for (const [args, said] of [
    [['update', '1', '--no-tag', '--tag', 'shade'], '--no-tag and --tag are given together'],
    [['update', '1', '--tag', 'shade', '--no-tag'], '--tag and --no-tag are given together'],
    [['create', '--name', 'z', '--tag', 'a', '--tag', 'b'], '--tag is given twice'],
    [['create', '--name', 'z', '--name', 'y'], '--name is given twice'],
  ] as const) {
    const run = await plants([...args], env);
    assert.equal(run.code, 2, `plants ${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, new RegExp(`^error: ${said}: give one\n`));
  }
  const listed = await fetch(`${url}/plants`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(await listed.text(), '[]\n');
});
