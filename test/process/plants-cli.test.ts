import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { plants, type Run, serverWithToken } from '../helpers/plants-cli.js';
import { cleanEnv, ROOT } from '../helpers/server-process.js';

// `plantstore plants ...` as a user runs it: real CLI processes against a real server.

const BIG = '9007199254740993'; // 2^53 + 1

test('plants commands against a running server', async (t) => {
  const { env, url, token } = await serverWithToken(t);

  await t.test('create, get, update, list and delete, ids exact in table and JSON', async () => {
    const created = await plants(
      ['create', '--id', BIG, '--name', 'Big fern', '--tag', 'shade'],
      env,
    );
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.stdout, `ID                NAME      TAG\n${BIG}  Big fern  shade\n`);

    const read = await plants(['get', BIG, '--json'], env);
    assert.equal(read.stdout, `{"id":${BIG},"name":"Big fern","tag":"shade"}\n`);

    const updated = await plants(
      ['update', BIG, '--no-tag', '--name', 'Fern\u001b[2J', '--json'],
      env,
    );
    assert.equal(updated.stdout, `{"id":${BIG},"name":"Fern\\u001b[2J"}\n`);

    await plants(['create', '--id', '9007199254740994', '--name', 'Aloe', '--tag', 'sun'], env);
    const table = await plants(['list'], env);
    assert.equal(
      table.stdout,
      'ID                NAME           TAG\n' +
        `${BIG}  Fern\\u{1b}[2J  -\n` +
        '9007199254740994  Aloe           sun\n',
      'a terminal is shown escape sequences, not given them',
    );
    const tagged = await plants(['list', '--tag', 'sun', '--json'], env);
    assert.equal(tagged.stdout, '{"id":9007199254740994,"name":"Aloe","tag":"sun"}\n');

    const deleted = await plants(['delete', '9007199254740994'], env);
    assert.deepEqual([deleted.code, deleted.stderr], [0, 'deleted plant 9007199254740994\n']);
    const limited = await plants(['list', '--limit', '1', '--json'], env);
    assert.equal(limited.stdout.split('\n').length, 2);
  });

  await t.test('--url and --token work without the environment', async () => {
    const run = await plants(['get', BIG, '--json', '--url', url, '--token', token]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, new RegExp(`"id":${BIG}`));
  });

  await t.test(
    'exit codes: 1 when the server refuses or is not there, 2 for the command line',
    async () => {
      const missing = await plants(['get', '5'], env);
      assert.deepEqual(
        [missing.code, missing.stderr],
        [1, 'plantstore: 404 (40401) No plant has id 5.\n'],
      );
      const exists = await plants(['create', '--id', BIG, '--name', 'x'], env);
      assert.equal(exists.code, 1);
      assert.match(exists.stderr, /409 \(40901\)/);
      const wrongToken = await plants(['list'], { ...env, PLANTSTORE_TOKEN: 'pst_wrong' });
      assert.equal(wrongToken.code, 1);
      assert.match(wrongToken.stderr, /401 \(40101\).*PLANTSTORE_TOKEN/);
      const noServer = await plants(['list'], { ...env, PLANTSTORE_URL: 'http://127.0.0.1:9' });
      assert.equal(noServer.code, 1);
      assert.match(noServer.stderr, /^plantstore: cannot reach http:\/\/127\.0\.0\.1:9: /);

      for (const args of [
        ['get', '05'],
        ['get', '9223372036854775808'],
        ['update', BIG],
        ['list', '--url', 'ftp://x'],
      ]) {
        const run = await plants(args, env);
        assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      }
      const noToken = await plants(['list'], { PLANTSTORE_URL: url });
      assert.equal(noToken.code, 2);
      assert.match(noToken.stderr, /no access token: pass --token or set PLANTSTORE_TOKEN/);
    },
  );
});

test('import reports each failed line, and running it again creates nothing twice', async (t) => {
  const { dir, env } = await serverWithToken(t);
  const file = join(dir, 'plants.jsonl');
  const lines = [
    '{"id": 9007199254740993, "name": "Big"}',
    '{"name": "Twin", "tag": "same"}',
    '',
    '{"name": "Twin", "tag": "same"}',
    'not json',
    '{"name": ""}',
    '{"id": 9007199254740993, "name": "Big again"}',
    '[1, 2]',
    '{"id": 5, "name": "Five"}',
  ];
  // Crashed after the first two lines: the server has them, the rest never came.
  writeFileSync(file, `${lines.slice(0, 2).join('\n')}\n`);
  const partial = await plants(['import', file], env);
  assert.equal(partial.code, 0, partial.stderr);
  assert.match(partial.stderr, /: 2 lines: 2 created, 0 created by an earlier run, 0 failed\n$/);

  writeFileSync(file, `${lines.join('\r\n')}\r\n`);
  const full = await plants(['import', file, '--concurrency', '3'], env);
  assert.equal(full.code, 1);
  assert.equal(
    full.stderr.split('\n').slice(-6).join('\n'),
    [
      `${file}: 8 lines: 2 created, 2 created by an earlier run, 4 failed`,
      "line 5: not JSON: JSON value expected but got 'n' at position 0",
      'line 6: 400 (40004) name must contain a non-blank character: white space, control and format characters alone are not a name.',
      'line 7: 409 (40901) A plant with id 9007199254740993 already exists.',
      'line 8: not a JSON object',
      '',
    ].join('\n'),
  );

  // The bad lines fixed or removed, and run again: still nothing twice.
  const fixed = [lines[0], lines[1], lines[3], '{"name": "Named now"}', lines[8]];
  writeFileSync(file, `${fixed.join('\n')}\n`);
  const again = await plants(['import', file, '--json'], env);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout, '');
  assert.match(again.stderr, /: 5 lines: 1 created, 4 created by an earlier run, 0 failed\n$/);

  const exported = await plants(['export'], env);
  assert.equal(exported.code, 0, exported.stderr);
  // The id-less lines got ids from the server, in the order they were created.
  assert.equal(
    exported.stdout,
    [
      '{"id":1,"name":"Twin","tag":"same"}',
      '{"id":2,"name":"Twin","tag":"same"}',
      '{"id":3,"name":"Named now"}',
      '{"id":5,"name":"Five"}',
      '{"id":9007199254740993,"name":"Big"}',
      '',
    ].join('\n'),
  );

  const withJson = await plants(['import', file, '--batch', 'another', '--json'], env);
  assert.equal(withJson.code, 1);
  assert.deepEqual(
    withJson.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { line: number; error: number }),
    [
      {
        line: 1,
        status: 409,
        error: 40901,
        message: 'A plant with id 9007199254740993 already exists.',
      },
      { line: 5, status: 409, error: 40901, message: 'A plant with id 5 already exists.' },
    ],
    'another batch is another import: the id-less lines are created again',
  );
});

test('export writes what import reads: a copy to another server is exact', async (t) => {
  const source = await serverWithToken(t);
  const target = await serverWithToken(t);
  const file = join(source.dir, 'in.jsonl');
  const count = 1050; // more than one page of 1000
  const lines = Array.from(
    { length: count },
    (_, i) => `{"id":${9007199254740993n + BigInt(i) * 2n},"name":"p${i}","tag":"t${i % 3}"}`,
  );
  writeFileSync(file, `${lines.join('\n')}\n`);
  const imported = await plants(['import', file, '--concurrency', '8'], source.env);
  assert.equal(imported.code, 0, imported.stderr);

  const exported = await plants(['export'], source.env);
  assert.equal(exported.stdout, `${lines.join('\n')}\n`, 'every plant, in id order, ids exact');
  assert.equal(exported.stderr, `exported ${count} plants\n`);

  const copy = join(target.dir, 'copy.jsonl');
  writeFileSync(copy, exported.stdout);
  assert.equal((await plants(['import', copy], target.env)).code, 0);
  const copied = await plants(['export', '--tag', 't1'], target.env);
  assert.equal(
    copied.stdout,
    lines
      .filter((_, i) => i % 3 === 1)
      .map((l) => `${l}\n`)
      .join(''),
  );
});

const SCRIPT = '/usr/bin/script';
const noTerminal = existsSync(SCRIPT) ? false : `SKIPPED: ${SCRIPT} (util-linux) is missing`;

test('on a terminal, import draws a progress bar', { skip: noTerminal }, async (t) => {
  const { dir, env } = await serverWithToken(t);
  const file = join(dir, 'in.jsonl');
  writeFileSync(file, '{"name":"a"}\n{"name":"b"}\n');
  // script(1) gives the command a pseudo-terminal and copies what it draws to stdout.
  const command = `${process.execPath} bin/plantstore plants import ${file}`;
  const run = await new Promise<Run>((resolve) => {
    execFile(
      SCRIPT,
      ['-qec', command, '/dev/null'],
      { cwd: ROOT, env: { ...cleanEnv(), ...env } },
      (error, stdout, stderr) => resolve({ code: error ? 1 : 0, stdout, stderr }),
    );
  });
  assert.equal(run.code, 0, run.stderr);
  const ESC = '\u001b';
  const half = `\r[${'#'.repeat(12)}${'.'.repeat(12)}]  50% imported 1 lines, 0 failed${ESC}[K`;
  assert.ok(run.stdout.includes(half), `a bar half full: ${JSON.stringify(run.stdout)}`);
  assert.ok(
    run.stdout.includes(`\r${ESC}[K${file}: 2 lines: 2 created`),
    'cleared for the summary',
  );
});
