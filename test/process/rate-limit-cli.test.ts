import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { awayFromMidnight, cleanEnv, cli, ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The rate-limit options of `serve`, as a user gives them: flags and environment variables,
// refused with exit 2 when malformed, and in effect on a real server when well-formed.

/** Runs `plantstore serve ...` expecting it to refuse its command line. */
function refused(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/plantstore', 'serve', '--port', '0', ...args], {
      cwd: ROOT,
      env: { ...cleanEnv(), ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('rate-limit options', () => {
  for (const [args, message] of [
    [['--rate-limit', '100'], /"100" is not a rate limit; use requests\/window/],
    [['--rate-limit', '0/60s'], /"0\/60s" is not a rate limit/],
    [['--auth-failure-limit', '10/2d'], /the window is at most 1d/],
    [['--trust-proxy', 'everyone'], /"everyone" is not a proxy address/],
    [['--trust-proxy', '10.0.0.0/33'], /"10.0.0.0\/33" is not a proxy address/],
  ] as const) {
    it(`serve ${args.join(' ')} exits 2 with a message`, async () => {
      const { code, stderr } = await refused([...args]);
      assert.equal(code, 2, stderr);
      assert.match(stderr, message);
    });
  }

  it('the environment variables are read and checked the same way', async () => {
    for (const name of [
      'PLANTSTORE_RATE_LIMIT',
      'PLANTSTORE_AUTH_FAILURE_LIMIT',
      'PLANTSTORE_TRUST_PROXY',
    ]) {
      const { code, stderr } = await refused([], { [name]: '1/x' });
      assert.equal(code, 2, `${name}: ${stderr}`);
      assert.match(stderr, /"1\/x" is not a/, name);
    }
  });

  it('a server started with --rate-limit, --auth-failure-limit off and --trust-proxy applies them', async (t) => {
    const db = ['--db', join(makeTempDir(t), 'cli.db')];
    const token = (await cli(['token', 'create', ...db])).stdout.trim();
    const server = await startServer(t, [
      ...db,
      '--rate-limit',
      '2/1d',
      '--auth-failure-limit',
      'off',
      '--trust-proxy',
      'loopback',
    ]);
    const get = async (authorization: string) => {
      const res = await fetch(`${server.url}/plants`, { headers: { authorization } });
      await res.arrayBuffer();
      return res;
    };
    await awayFromMidnight(60_000);
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await get(`Bearer ${token}`));
    assert.deepEqual(
      answers.map((res) => res.status),
      [200, 200, 429],
    );
    assert.equal(answers[0]!.headers.get('ratelimit-policy'), '"token";q=2;w=86400');
    for (let i = 0; i < 5; i++) {
      const failed = await get('Bearer pst_wrong');
      assert.equal(failed.status, 401);
      assert.equal(failed.headers.get('ratelimit'), null);
    }
  });

  it('--trust-proxy on a real server: X-Forwarded-For from a trusted proxy names the client', async (t) => {
    const db = ['--db', join(makeTempDir(t), 'proxy.db')];
    const server = await startServer(t, [
      ...db,
      '--auth-failure-limit',
      '2/1d',
      '--trust-proxy',
      '127.0.0.1',
    ]);
    const from = async (client: string) => {
      const res = await fetch(`${server.url}/plants`, { headers: { 'x-forwarded-for': client } });
      await res.arrayBuffer();
      return res;
    };
    await awayFromMidnight(60_000);
    assert.deepEqual(
      [
        (await from('203.0.113.1')).status,
        (await from('203.0.113.1')).status,
        (await from('203.0.113.1')).status,
        (await from('203.0.113.2')).status,
      ],
      [401, 401, 429, 401],
    );
  });
});
