import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { plants, type Run } from '../helpers/plants-cli.js';
import { ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';
import { ALLOW_LOOPBACK, eventually } from '../helpers/webhook-harness.js';
import { type Delivery, startReceiver } from '../helpers/webhook-receiver.js';
import { serverForWebhooks, webhooks } from '../helpers/webhooks-cli.js';

// `plantstore webhooks ...` as a user runs it: real CLI processes against a real server on
// SQLite, and a real receiver on loopback (opened with --webhook-allow-networks).

const SECRET = /whsec_[A-Za-z0-9+/]{43}=/;
const secretsIn = (text: string) => text.match(new RegExp(SECRET, 'g')) ?? [];

function verify(secret: string, delivery: Delivery): unknown {
  return new Webhook(secret).verify(delivery.body, {
    'webhook-id': String(delivery.headers['webhook-id']),
    'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
    'webhook-signature': String(delivery.headers['webhook-signature']),
  });
}

const ok = (run: Run, what: string) => assert.equal(run.code, 0, `${what}: ${run.stderr}`);

/** The JSON lines of a run's stdout, ids as text (they may be past 2^53). */
const jsonLines = (run: Run) =>
  run.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map(
      (line) => JSON.parse(line.replace(/"id":(-?\d+)/g, '"id":"$1"')) as Record<string, unknown>,
    );

/**
 * `webhooks` on the environment given, recording the run: after the test, no run but
 * those of create and rotate-secret may have shown a secret.
 */
function secretlessRuns(t: TestContext, env: Record<string, string>) {
  const runs: Run[] = [];
  t.after(() => {
    for (const run of runs) {
      assert.doesNotMatch(run.stdout + run.stderr, SECRET, 'a secret only on create and rotate');
    }
  });
  return async (args: string[], environment: Record<string, string> = env) => {
    const run = await webhooks(args, environment);
    runs.push(run);
    return run;
  };
}

test('endpoints: create, list, get, update, rotate-secret and delete', async (t) => {
  const { env, url, token } = await serverForWebhooks(t);
  const run = secretlessRuns(t, env);
  const hooks = 'http://127.0.0.1:9/hooks';

  // create: a table for people, then the secret on a line of its own; --json for scripts.
  const events = 'plant.created,plant.deleted';
  const created = await webhooks(
    ['create', hooks, '--events', events, '--description', 'CRM'],
    env,
  );
  ok(created, 'create');
  const [secret, ...more] = secretsIn(created.stdout);
  assert.ok(secret !== undefined && more.length === 0, created.stdout);
  const table =
    'ID  URL                       EVENTS                       ENABLED  DESCRIPTION\n' +
    `1   ${hooks}  ${events}  yes      CRM\n`;
  assert.equal(created.stdout, `${table}\nsecret: ${secret}\n`);
  assert.match(created.stderr, /^the signing secret is shown this once/);

  const other = await webhooks(['create', 'http://127.0.0.1:9/other', '--json'], env);
  ok(other, 'create --json');
  const [second] = jsonLines(other);
  assert.deepEqual(
    { ...second, createdAt: '', updatedAt: '' },
    {
      id: '2',
      url: 'http://127.0.0.1:9/other',
      events: ['plant.created'],
      enabled: true,
      createdAt: '',
      updatedAt: '',
      secret: secretsIn(other.stdout)[0],
    },
  );

  await t.test('list and get: a table or JSON Lines, never the secret', async () => {
    const listed = await run(['list']);
    ok(listed, 'list');
    assert.equal(
      listed.stdout,
      `${table}2   http://127.0.0.1:9/other  plant.created                yes      -\n`,
    );
    const json = await run(['list', '--json']);
    assert.deepEqual(
      jsonLines(json).map((e) => [e.id, e.url, e.events]),
      [
        ['1', hooks, ['plant.created', 'plant.deleted']],
        ['2', 'http://127.0.0.1:9/other', ['plant.created']],
      ],
    );
    const limited = await run(['list', '--limit', '1', '--json']);
    assert.deepEqual(
      jsonLines(limited).map((e) => e.id),
      ['1'],
    );
    const after = await run(['list', '--after', '1', '--json']);
    assert.deepEqual(
      jsonLines(after).map((e) => e.id),
      ['2'],
    );
    const got = await run(['get', '1']);
    assert.equal(got.stdout, table);
    const gotJson = await run(['get', '1', '--json']);
    assert.equal(gotJson.stdout.split('\n').length, 2, 'one line');
    assert.equal(jsonLines(gotJson)[0]!.description, 'CRM');
    const flags = await run(['get', '2', '--json', '--url', url, '--token', token], {});
    ok(flags, '--url and --token without the environment');
    assert.match(flags.stdout, /^\{"id":2,/);
  });

  await t.test('update: disable, enable, url, events, description', async () => {
    const disabled = await run([
      'update',
      '2',
      '--disable',
      '--endpoint-url',
      'http://127.0.0.1:10/moved',
      '--description',
      'Old\u001b[2J',
    ]);
    ok(disabled, 'update --disable');
    assert.equal(
      disabled.stdout,
      'ID  URL                        EVENTS         ENABLED          DESCRIPTION\n' +
        '2   http://127.0.0.1:10/moved  plant.created  no (by request)  Old\\u{1b}[2J\n',
      'a terminal is shown escape sequences, not given them',
    );
    const enabled = await run([
      'update',
      '2',
      '--enable',
      '--events',
      'plant.updated,plant.deleted',
      '--no-description',
      '--json',
    ]);
    ok(enabled, 'update --enable');
    const [endpoint] = jsonLines(enabled);
    assert.deepEqual(
      [endpoint!.url, endpoint!.events, endpoint!.enabled, 'description' in endpoint!],
      ['http://127.0.0.1:10/moved', ['plant.updated', 'plant.deleted'], true, false],
    );
    const escaped = await run(['update', '2', '--description', 'x\u001b', '--json']);
    assert.match(escaped.stdout, /"description":"x\\u001b"/, 'JSON is exact');
  });

  await t.test('rotate-secret: a new secret, printed this once', async () => {
    const rotated = await webhooks(['rotate-secret', '1'], env);
    ok(rotated, 'rotate-secret');
    const [fresh, ...more] = secretsIn(rotated.stdout);
    assert.ok(fresh !== undefined && fresh !== secret && more.length === 0, rotated.stdout);
    assert.equal(rotated.stdout, `${table}\nsecret: ${fresh}\n`);
    assert.match(rotated.stderr, /new signing secret is shown this once; for 24 hours/);
    const json = await webhooks(['rotate-secret', '2', '--json'], env);
    ok(json, 'rotate-secret --json');
    assert.equal(json.stdout.split('\n').length, 2, 'one line');
    assert.match(jsonLines(json)[0]!.secret as string, SECRET);
    assert.equal(jsonLines(json)[0]!.id, '2');
  });

  await t.test('delete', async () => {
    const deleted = await run(['delete', '2']);
    assert.deepEqual(
      [deleted.code, deleted.stdout, deleted.stderr],
      [0, '', 'deleted webhook endpoint 2\n'],
    );
    const gone = await run(['get', '2']);
    assert.deepEqual(
      [gone.code, gone.stderr],
      [1, 'plantstore: 404 (40403) No webhook endpoint has id 2.\n'],
    );
  });
});

test('deliveries and retry, signed with the secrets create and rotate-secret print', async (t) => {
  const { env } = await serverForWebhooks(t, ['--webhook-retry-schedule', '0s']);
  const run = secretlessRuns(t, env);
  const receiver = await startReceiver(t);
  receiver.fallback = 500;
  const created = await webhooks(
    ['create', receiver.url, '--events', 'plant.created,plant.deleted', '--json'],
    env,
  );
  ok(created, 'create');
  const secret = jsonLines(created)[0]!.secret as string;

  const plant = await plants(['create', '--name', 'Fern', '--json'], env);
  ok(plant, 'plants create');
  const plantId = /"id":(\d+)/.exec(plant.stdout)![1]!;
  // The first attempt and the schedule's one retry (after 0 s) are both answered 500.
  const failed = await eventually(async () => {
    const listed = await run(['deliveries', '1', '--status', 'failed', '--json']);
    return jsonLines(listed).length === 1 ? listed : undefined;
  }, 'the message failing');
  const [message] = jsonLines(failed);
  assert.deepEqual(
    [
      message!.id,
      message!.eventType,
      message!.payload,
      message!.status,
      (message!.attempts as unknown[]).length,
    ],
    ['1', 'plant.created', { id: plantId, name: 'Fern' }, 'failed', 2],
  );
  const table = await run(['deliveries', '1']);
  assert.equal(
    table.stdout,
    'ID  STATUS  EVENT          PLANT  CREATED                   ATTEMPTS  LAST RESULT  NEXT ATTEMPT\n' +
      `1   failed  plant.created  ${plantId.padEnd(5)}  ${String(message!.createdAt)}  2         500          -\n`,
  );
  const sent = await receiver.waitFor(2);
  assert.ok(verify(secret, sent[0]!), 'the secret create printed signs the messages');

  receiver.fallback = 200;
  const retried = await run(['retry', '1', '1']);
  assert.deepEqual(
    [retried.code, retried.stdout, retried.stderr],
    [0, '', 'delivery 1 of webhook endpoint 1 is due now\n'],
  );
  const again = await receiver.waitFor(3);
  assert.equal(again[2]!.headers['webhook-id'], sent[0]!.headers['webhook-id'], 'same webhook-id');
  await eventually(async () => {
    const listed = await run(['deliveries', '1', '--status', 'delivered']);
    return /^1 +delivered +plant\.created .* 3 +200 +-$/m.test(listed.stdout) ? true : undefined;
  }, 'the retried message delivered');

  const rotated = await webhooks(['rotate-secret', '1', '--json'], env);
  ok(rotated, 'rotate-secret');
  const fresh = jsonLines(rotated)[0]!.secret as string;
  ok(await plants(['delete', plantId], env), 'plants delete');
  const deleted = (await receiver.waitFor(4))[3]!;
  assert.equal(deleted.headers['webhook-event-type'], 'plant.deleted');
  assert.ok(verify(fresh, deleted), 'the new secret signs');
  assert.ok(verify(secret, deleted), 'and the old one too, for 24 hours');

  await eventually(async () => {
    const all = jsonLines(await run(['deliveries', '1', '--json']));
    return all.length === 2 && all[0]!.status === 'delivered' ? true : undefined;
  }, 'the delete delivered');
  const newest = await run(['deliveries', '1', '--limit', '1', '--json']);
  assert.deepEqual(
    jsonLines(newest).map((d) => [d.id, d.eventType]),
    [['2', 'plant.deleted']],
    'newest first',
  );
  const older = await run(['deliveries', '1', '--after', '2', '--json']);
  assert.deepEqual(
    jsonLines(older).map((d) => d.id),
    ['1'],
  );
  const none = await run(['deliveries', '1', '--status', 'pending']);
  assert.equal(none.stdout.split('\n').length, 2, 'the header alone');

  // A 410 disables the endpoint; its message stays pending, and waits for the endpoint to be
  // enabled again, not for a time (already past): the table says so, --json keeps the time.
  receiver.fallback = 410;
  ok(await plants(['create', '--name', 'Ivy'], env), 'plants create');
  await receiver.waitFor(5);
  const held = await eventually(async () => {
    const listed = await run(['deliveries', '1', '--status', 'pending']);
    return /410 +when enabled$/m.test(listed.stdout) ? listed : undefined;
  }, 'the message held by the disabled endpoint');
  assert.match(held.stdout, /^3 +pending +plant\.created .* 1 +410 +when enabled$/m);
  const [pending] = jsonLines(await run(['deliveries', '1', '--status', 'pending', '--json']));
  assert.match(String(pending!.nextAttemptAt), /^\d{4}-\d\d-\d\dT/);
});

test('errors: one line on stderr, 1 from the server, 2 for the command line', async (t) => {
  const { env, url, readOnly } = await serverForWebhooks(t);
  const run = secretlessRuns(t, env);
  ok(await webhooks(['create', 'http://127.0.0.1:9/hooks'], env), 'create');

  for (const [args, expected] of [
    [['get', '7'], 'plantstore: 404 (40403) No webhook endpoint has id 7.\n'],
    [
      ['retry', '1', '99'],
      'plantstore: 404 (40404) Webhook endpoint 1 has no delivery with id 99.\n',
    ],
    [['create', 'http://10.0.0.1/hooks'], /^plantstore: 400 \(40011\) [^\n]+\n$/],
    [['update', '1', '--endpoint-url', 'ftp://x'], /^plantstore: 400 \(\d+\) [^\n]+\n$/],
  ] as const) {
    const refused = await run([...args]);
    assert.equal(refused.code, 1, `${args.join(' ')}: ${refused.stderr}`);
    assert.equal(refused.stdout, '');
    if (typeof expected === 'string') assert.equal(refused.stderr, expected);
    else assert.match(refused.stderr, expected);
  }
  const scopeless = await run(['list'], { ...env, PLANTSTORE_TOKEN: readOnly });
  assert.equal(scopeless.code, 1);
  assert.match(
    scopeless.stderr,
    /^plantstore: 403 \(40301\) .*webhooks:read.*--scopes plants:read,webhooks:read,webhooks:write\)\n$/,
  );
  const wrongToken = await run(['list'], { ...env, PLANTSTORE_TOKEN: 'pst_wrong' });
  assert.equal(wrongToken.code, 1);
  assert.match(wrongToken.stderr, /401 \(40101\).*PLANTSTORE_TOKEN/);
  const noServer = await run(['list'], { ...env, PLANTSTORE_URL: 'http://127.0.0.1:9' });
  assert.equal(noServer.code, 1);
  assert.match(noServer.stderr, /^plantstore: cannot reach http:\/\/127\.0\.0\.1:9: /);

  for (const args of [
    ['get', '1.5'],
    ['retry', '1', 'x'],
    ['update', '1'],
    ['update', '1', '--enable', '--disable'],
    ['create', 'http://127.0.0.1:9/x', '--events', 'plant.made'],
    ['create', '--url', 'http://127.0.0.1:9/x'],
    ['deliveries', '1', '--status', 'lost'],
    ['deliveries', '1', '--limit', '0'],
    ['list', '--url', 'ftp://x'],
  ]) {
    const wrong = await run(args);
    assert.equal(wrong.code, 2, `${args.join(' ')}: ${wrong.stderr}`);
    assert.equal(wrong.stdout, '', args.join(' '));
  }
  const oneLine: [string[], string][] = [
    [['get', '007'], 'the webhook endpoint id is written without leading zeros: 7, not 007'],
    [['retry', '1', '+5'], 'the delivery id is written without a plus sign: 5, not +5'],
    [['deliveries', '1', '--after', '-0'], '--after is written without a sign: 0, not -0'],
    [
      ['update', '1', '--events', 'plant.created,plant.made'],
      '--events: "plant.made" is no event: give plant.created, plant.updated, plant.deleted, comma-separated',
    ],
  ];
  for (const [args, line] of oneLine) {
    const wrong = await run(args);
    assert.deepEqual([wrong.code, wrong.stderr], [2, `plantstore: ${line}\n`], args.join(' '));
  }
  const noToken = await run(['list'], { PLANTSTORE_URL: url });
  assert.deepEqual(
    [noToken.code, noToken.stderr],
    [
      2,
      'plantstore: no access token: pass --token or set PLANTSTORE_TOKEN ' +
        '("plantstore token create" makes one)\n',
    ],
  );
  const listed = await run(['list', '--json']);
  assert.equal(jsonLines(listed).length, 1, 'nothing was created or changed');
  assert.deepEqual(jsonLines(listed)[0]!.url, 'http://127.0.0.1:9/hooks');
});

test('webhooks --help: every subcommand, its arguments and options', async () => {
  const help = await webhooks(['--help']);
  ok(help, 'webhooks --help');
  const subcommands = {
    list: ['--limit <n>', '--after <id>', '--json'],
    get: ['<id>', '--json', 'never its secret'],
    create: ['<endpoint-url>', '--events <events>', '--description <text>', 'this once'],
    update: ['--endpoint-url <url>', '--enable', '--disable', '--no-description', 'Examples:'],
    delete: ['<id>'],
    'rotate-secret': ['<id>', '--json', '24 h'],
    deliveries: ['--status <status>', '--limit <n>', '--after <id>', 'newest first'],
    retry: ['<id> <delivery-id>', 'webhook-id'],
  };
  for (const name of Object.keys(subcommands)) {
    assert.match(help.stdout, new RegExp(`^  ${name} \\[options\\]`, 'm'), name);
  }
  assert.match(help.stdout, /webhooks:read \(list, get, deliveries\) and webhooks:write/);
  assert.match(help.stdout, /token create --scopes plants:read,webhooks:read,webhooks:write/);
  for (const [name, expected] of Object.entries(subcommands)) {
    const run = await webhooks([name, '--help']);
    ok(run, `${name} --help`);
    assert.match(run.stdout, new RegExp(`^Usage: plantstore webhooks ${name} \\[options\\]`));
    const common = ['--url <url>', 'PLANTSTORE_URL', '--token <token>', 'PLANTSTORE_TOKEN'];
    for (const text of [...common, ...expected]) {
      assert.ok(run.stdout.includes(text), `${name} --help shows ${text}:\n${run.stdout}`);
    }
  }
});

test('docs/cli.md, Webhooks on a running server: the example runs as written', async (t) => {
  const text = readFileSync(join(ROOT, 'docs/cli.md'), 'utf8');
  const section = text.slice(text.indexOf('\n## Webhooks on a running server\n'));
  const script = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
  const db = join(makeTempDir(t), 'docs.db');
  const server = await startServer(t, ['--db', db, ...ALLOW_LOOPBACK]);
  const receiver = await startReceiver(t);
  // The server and the hook URL are the only things changed: hooks.example.com is not
  // reached from a test, and a loopback receiver takes its place.
  const runnable = script
    .replaceAll('http://127.0.0.1:8080', server.url)
    .replaceAll('https://hooks.example.com/plants', receiver.url);
  assert.equal(runnable.split(receiver.url).length, 2, 'the example subscribes the hook URL');
  const output = await new Promise<string>((resolve, reject) => {
    execFile(
      'bash',
      ['-c', `set -eo pipefail\n${runnable}`],
      // The token the example makes is in the server's database.
      { cwd: ROOT, env: { PATH: process.env.PATH, PLANTSTORE_DB: db } },
      (error, stdout, stderr) =>
        error ? reject(new Error(`${error.message}${stderr}`)) : resolve(stdout),
    );
  });
  assert.equal(secretsIn(output).length, 2, `create and rotate-secret: ${output}`);
  assert.match(output, /^1 {3}http:\/\/127\.0\.0\.1:\d+\/hooks\/plants {2}.* {2}yes {6}CRM$/m);
  assert.match(output, /^\{"id":1,"url":"http:\/\/127\.0\.0\.1:\d+\/hooks\/plants"/m);
  assert.match(output, /^ID {2}STATUS +EVENT .*\n1 {3}\w+ +plant\.created {2}1 /m);
  assert.match(
    output,
    /^1 {3}http:\S+ +plant\.created,plant\.deleted {2}no \(by request\) {2}CRM$/m,
  );
  assert.equal(JSON.parse((await receiver.waitFor(1))[0]!.body).name, 'Fern');
});
