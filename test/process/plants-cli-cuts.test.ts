import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import { plants, serverWithToken } from '../helpers/plants-cli.js';
import { cli, startServer } from '../helpers/server-process.js';
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
