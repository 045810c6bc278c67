import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { describe, it, test, type TestContext } from 'node:test';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { cleanEnv, LISTENING, type LogLine, ROOT } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The timeout, CORS and webhook limit options of `serve`: bad values are usage errors (exit 2)
// before anything starts, and the environment variables work like the flags. And the one line
// it logs to say which database it uses.

function serve(args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawn(process.execPath, ['bin/plantstore', 'serve', '--db', ':memory:', ...args], {
    cwd: ROOT,
    env: { ...cleanEnv(), ...env },
  });
}

async function refused(args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  const child = serve(args, env);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 2, `${args.join(' ')}: ${stderr}`);
  return stderr;
}

test('out-of-range and malformed timeouts are refused with exit 2', async () => {
  for (const [args, message] of [
    [['--request-timeout', '0s'], /"0s" is not a duration/],
    [['--request-timeout', '2h'], /"2h" is out of range \(1s to 1h\)/],
    [['--headers-timeout', '500ms'], /"500ms" is not a duration/],
    [['--keep-alive-timeout', '61m'], /out of range/],
    [['--shutdown-grace', 'soon'], /"soon" is not a duration/],
    [
      ['--request-timeout', '5s', '--headers-timeout', '6s'],
      /--headers-timeout \(6s\) cannot be longer than --request-timeout \(5s\)/,
    ],
  ] as const) {
    assert.match(await refused([...args]), message, args.join(' '));
  }
  assert.match(
    await refused([], { PLANTSTORE_HEADERS_TIMEOUT: '40s' }),
    /--headers-timeout \(40s\) cannot be longer than --request-timeout \(30s\)/,
  );
});

test('malformed --cors-origins are refused with exit 2', async () => {
  for (const [value, message] of [
    ['https://app.example/', /write it as https:\/\/app\.example/],
    ['*,https://app.example', /give it alone/],
    ['app.example', /not an origin/],
  ] as const) {
    assert.match(await refused(['--cors-origins', value]), message, value);
  }
  assert.match(await refused([], { PLANTSTORE_CORS_ORIGINS: 'ftp://x.example' }), /not an origin/);
});

test('--webhook-max-endpoints takes 1 to 10000, from the flag or the environment', async () => {
  for (const value of ['0', '10001', '1.5', 'many']) {
    const message = new RegExp(`"${value}" is not a number of webhook endpoints \\(1 to 10000\\)`);
    assert.match(await refused(['--webhook-max-endpoints', value]), message, value);
  }
  assert.match(
    await refused([], { PLANTSTORE_WEBHOOK_MAX_ENDPOINTS: '0' }),
    /from env 'PLANTSTORE_WEBHOOK_MAX_ENDPOINTS' is invalid/,
  );
});

async function listening(t: TestContext, env: NodeJS.ProcessEnv): Promise<string> {
  const child = serve(['--port', '0'], env);
  t.after(() => child.kill('SIGKILL'));
  for await (const line of createInterface({ input: child.stdout })) {
    const url = LISTENING.exec((JSON.parse(line) as { msg?: string }).msg ?? '')?.[1];
    if (url !== undefined) return url;
  }
  assert.fail('serve exited before listening');
}

test('the environment sets the keep-alive timeout and the CORS origins', async (t) => {
  const url = await listening(t, {
    PLANTSTORE_KEEP_ALIVE_TIMEOUT: '7s',
    PLANTSTORE_CORS_ORIGINS: 'https://app.example',
  });
  const res = await fetch(`${url}/healthz`, { headers: { origin: 'https://app.example' } });
  await res.text();
  assert.equal(res.headers.get('keep-alive'), 'timeout=7');
  assert.equal(res.headers.get('access-control-allow-origin'), 'https://app.example');
});

test('timeouts longer than Node’s own defaults start: a 1 h request timeout, a 10 min header timeout', async (t) => {
  const url = await listening(t, {
    PLANTSTORE_REQUEST_TIMEOUT: '1h',
    PLANTSTORE_HEADERS_TIMEOUT: '10m',
  });
  const res = await fetch(`${url}/healthz`);
  assert.equal(res.status, 200, await res.text());
});

/** Starts `serve --port 0`, returns its log lines up to "Server listening", and stops it. */
async function startUpLines(t: TestContext, args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['bin/plantstore', 'serve', '--port', '0', ...args], {
    cwd: ROOT,
    env: { ...cleanEnv(), ...env },
  });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const lines: LogLine[] = [];
  for await (const text of createInterface({ input: child.stdout })) {
    const line = JSON.parse(text) as LogLine;
    lines.push(line);
    if (LISTENING.test(line.msg ?? '')) break;
  }
  assert.ok(
    lines.some((line) => LISTENING.test(line.msg ?? '')),
    `serve did not listen: ${stderr}`,
  );
  child.kill('SIGTERM');
  await once(child, 'exit');
  return lines;
}

describe('serve says which database it uses, once, before it listens', () => {
  it('SQLite: the absolute path and the durability', async (t) => {
    const dir = makeTempDir(t);
    const lines = await startUpLines(t, ['--db', join(dir, 's.db'), '--durability', 'process']);
    const named = lines.filter((line) => line.database !== undefined);
    assert.equal(named.length, 1, JSON.stringify(lines));
    assert.equal(named[0]!.database, `SQLite database ${join(dir, 's.db')}`);
    assert.equal(named[0]!.durability, 'process');
    assert.equal(named[0]!.msg, `using SQLite database ${join(dir, 's.db')}, durability process`);
  });

  it(
    'PostgreSQL from DATABASE_URL: says so, and never shows the password',
    { skip: POSTGRES_SKIP },
    async (t) => {
      const url = new URL(await freshDatabase(t));
      url.password = 'sekret-in-url';
      const lines = await startUpLines(t, [], { DATABASE_URL: url.toString() });
      const named = lines.filter((line) => line.database !== undefined);
      assert.equal(named.length, 1, JSON.stringify(lines));
      const database = `PostgreSQL database "${url.pathname.slice(1)}" on ${url.host} as ${url.username} (from DATABASE_URL)`;
      assert.equal(named[0]!.msg, `using ${database}, durability power`);
      assert.doesNotMatch(JSON.stringify(lines), /sekret/);
    },
  );
});
