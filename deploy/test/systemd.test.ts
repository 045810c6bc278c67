import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test, type TestContext } from 'node:test';
import { makeTempDir } from '../../test/helpers/temp-dir.js';
import { ROOT } from '../../test/helpers/server-process.js';
import { cannotRun, check, freePort, run, serveEnvironmentNames, skipUnless } from './tools.js';

// deploy/systemd/: the unit passes `systemd-analyze verify` without a word, scores well in
// `systemd-analyze security`, and its command, user, environment and stop work as systemd
// would run them (no systemd runs here as PID 1, so the test plays its part).

const UNIT = join(ROOT, 'deploy/systemd/plantstore.service');
const ENV_FILE = join(ROOT, 'deploy/systemd/plantstore.env');
const SYSUSERS = join(ROOT, 'deploy/systemd/plantstore.sysusers');
/** Where the unit expects the service; the tests put the checkout there instead. */
const INSTALLED = '/opt/plantstore';
const STATE = '/var/lib/plantstore';
/** Above this `systemd-analyze security` exposure (0 best, 10 worst) the test fails. */
const MAX_EXPOSURE = 2.0;
/** Stands in for the unit's User= (nobody), which needs not exist here. */
const NOBODY = 65534;

const skip = skipUnless(
  'deploy/test/systemd.test.ts',
  cannotRun('systemd-analyze', ['--version']) ??
    (process.getuid?.() === 0 ? undefined : 'not root: cannot run the unit as its own user'),
);

/** The [Service] settings of the unit: every value of each key, in order. */
function serviceSettings(text: string): Map<string, string[]> {
  const settings = new Map<string, string[]>();
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = header[1]!;
      continue;
    }
    if (section !== 'Service') continue;
    const eq = line.indexOf('=');
    const key = line.slice(0, eq);
    settings.set(key, [...(settings.get(key) ?? []), line.slice(eq + 1)]);
  }
  return settings;
}

function one(settings: Map<string, string[]>, key: string): string {
  const values = settings.get(key);
  assert.ok(values?.length === 1, `${key}= is set once in the unit`);
  return values[0]!;
}

/** `VAR=value` lines (comments and blank lines skipped), as systemd reads EnvironmentFile=. */
function environmentLines(text: string): [string, string][] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const eq = line.indexOf('=');
      return [line.slice(0, eq), line.slice(eq + 1)];
    });
}

/** The seconds of a systemd time span the unit writes as `30s`. */
function seconds(span: string): number {
  const match = /^(\d+)s$/.exec(span);
  assert.ok(match, `a time span in seconds: ${span}`);
  return Number(match[1]);
}

/** A copy of the unit whose paths under /opt/plantstore lead to this checkout. */
function unitHere(t: TestContext): string {
  const dir = makeTempDir(t);
  const path = join(dir, 'plantstore.service');
  writeFileSync(path, readFileSync(UNIT, 'utf8').replaceAll(INSTALLED, ROOT));
  return path;
}

test('systemd-analyze verify has nothing to say about the unit', { skip }, async (t) => {
  // verify checks that ExecStart's program exists: the copy points at this checkout's.
  const ran = await run('systemd-analyze', ['verify', unitHere(t)]);
  assert.equal(ran.code, 0, ran.stderr);
  // Warnings (an unknown key, a value it cannot parse) still exit 0: any output fails.
  assert.equal(ran.stdout + ran.stderr, '');
});

test(`systemd-analyze security rates the unit at most ${MAX_EXPOSURE}`, { skip }, async (t) => {
  const out = await check('systemd-analyze', ['security', '--offline=yes', unitHere(t)]);
  const score = /Overall exposure level for plantstore\.service: (\d+\.\d+) (\S+)/.exec(out);
  assert.ok(score, out);
  t.diagnostic(`systemd-analyze security: exposure ${score[1]} ${score[2]} (0 best, 10 worst)`);
  for (const line of out.split('\n').filter((l) => l.startsWith('✗'))) t.diagnostic(line);
  assert.ok(Number(score[1]) <= MAX_EXPOSURE, out);
});

test('the sysusers file creates the user the unit runs as', { skip }, async (t) => {
  const root = makeTempDir(t);
  mkdirSync(join(root, 'etc'));
  const ran = await new Promise<number | null>((resolve, reject) => {
    const child = spawn('systemd-sysusers', [`--root=${root}`, '-'], { stdio: 'pipe' });
    child.stdin.end(readFileSync(SYSUSERS));
    child.on('error', reject);
    child.on('close', resolve);
  });
  assert.equal(ran, 0);
  const settings = serviceSettings(readFileSync(UNIT, 'utf8'));
  const user = one(settings, 'User');
  const passwd = readFileSync(join(root, 'etc/passwd'), 'utf8');
  const entry = passwd.split('\n').find((line) => line.startsWith(`${user}:`));
  assert.ok(entry, passwd);
  const [, , uid, gid, , home, shell] = entry.split(':');
  assert.ok(Number(uid) > 0 && Number(uid) < 1000, `a system user: ${entry}`);
  assert.equal(home, STATE);
  assert.equal(shell, '/usr/sbin/nologin');
  const group = one(settings, 'Group');
  assert.match(
    readFileSync(join(root, 'etc/group'), 'utf8'),
    new RegExp(`^${group}:x:${gid}:`, 'm'),
  );
});

test('every variable the unit and its env file set is one serve reads', async () => {
  const help = await check(process.execPath, [join(ROOT, 'bin/plantstore'), 'serve', '--help']);
  const known = serveEnvironmentNames(help);
  assert.ok(known.has('PLANTSTORE_DB'), help);
  known.add('NODE_ENV');
  const settings = serviceSettings(readFileSync(UNIT, 'utf8'));
  const names = [
    ...(settings.get('Environment') ?? []).map((value) => value.split('=')[0]!),
    ...environmentLines(readFileSync(ENV_FILE, 'utf8')).map(([name]) => name),
    // The commented-out examples too: uncommented, they must work.
    ...[...readFileSync(ENV_FILE, 'utf8').matchAll(/^# ?([A-Z_]+)=/gm)].map((m) => m[1]!),
  ];
  for (const name of names) assert.ok(known.has(name), `serve --help names ${name}`);
});

test(
  'the unit serves as its user from its state directory and stops on SIGTERM',
  { skip },
  async (t) => {
    const settings = serviceSettings(readFileSync(UNIT, 'utf8'));
    const dir = makeTempDir(t);
    const here = (value: string) => value.replaceAll(INSTALLED, ROOT).replaceAll(STATE, state);
    // StateDirectory=plantstore: systemd makes /var/lib/plantstore, the user's, 0700.
    assert.equal(one(settings, 'StateDirectory'), 'plantstore');
    const state = join(dir, 'state');
    mkdirSync(state, { mode: Number.parseInt(one(settings, 'StateDirectoryMode'), 8) });
    chownSync(state, NOBODY, NOBODY);
    chownSync(dir, NOBODY, NOBODY);
    // EnvironmentFile=: the example, on a free port of the loopback.
    const port = await freePort();
    const file = readFileSync(ENV_FILE, 'utf8').replace(/^PORT=.*$/m, `PORT=${port}`);
    assert.match(one(settings, 'EnvironmentFile'), /^-\/etc\/plantstore\/plantstore\.env$/);
    const env: NodeJS.ProcessEnv = {
      // systemd's PATH for services.
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      ...Object.fromEntries(
        (settings.get('Environment') ?? []).map((value) => {
          const eq = value.indexOf('=');
          return [value.slice(0, eq), here(value.slice(eq + 1))];
        }),
      ),
      ...Object.fromEntries(environmentLines(file)),
    };
    assert.equal(env.HOST, '127.0.0.1');
    // User=, NoNewPrivileges=, UMask=, WorkingDirectory=, ExecStart=, as systemd applies them.
    const execStart = here(one(settings, 'ExecStart')).split(' ');
    const started = Date.now();
    const child = spawn(
      'setpriv',
      [
        `--reuid=${NOBODY}`,
        `--regid=${NOBODY}`,
        '--clear-groups',
        '--no-new-privs',
        '--',
        '/bin/sh',
        '-c',
        'umask "$1" && cd "$2" && shift 2 && exec "$@"',
        'sh',
        one(settings, 'UMask'),
        here(one(settings, 'WorkingDirectory')),
        ...execStart,
      ],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    t.after(() => child.kill('SIGKILL'));
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const lines: { msg?: string }[] = [];
    const listening = new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (text) => {
        lines.push(JSON.parse(text) as { msg?: string });
        if (/^Server listening at /.test(lines.at(-1)!.msg ?? '')) resolve();
      });
      void exited.then(([code]) => reject(new Error(`serve exited ${code}: ${stderr}`)));
      setTimeout(
        () => reject(new Error(`serve did not listen in 15 s: ${stderr}`)),
        15_000,
      ).unref();
    });
    await listening;
    const database = join(state, 'plantstore.db');
    assert.ok(
      lines.some(
        (line) =>
          line.msg === `using SQLite database ${database} (from PLANTSTORE_DB), durability power`,
      ),
      JSON.stringify(lines),
    );
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(health.status, 200);
    const db = statSync(database);
    assert.equal(db.uid, NOBODY);
    assert.equal(db.mode & 0o777, 0o600);

    // KillMode=mixed, KillSignal=SIGTERM: the main process alone gets it, and must be gone
    // well before TimeoutStopSec, when systemd would SIGKILL it.
    assert.equal(one(settings, 'KillSignal'), 'SIGTERM');
    assert.equal(one(settings, 'KillMode'), 'mixed');
    const grace = seconds(env.PLANTSTORE_SHUTDOWN_GRACE!);
    const timeout = seconds(one(settings, 'TimeoutStopSec'));
    assert.ok(
      timeout >= grace + 15,
      'room after the grace period to close the database and workers',
    );
    const stopping = Date.now();
    child.kill('SIGTERM');
    const [code, signal] = await exited;
    assert.equal(code, 0, `exit ${code ?? signal}: ${stderr}`);
    assert.ok(Date.now() - stopping < grace * 1000, 'an idle server stops at once');
    assert.ok(lines.some((line) => line.msg === 'stopped'));
    t.diagnostic(`served and stopped in ${Date.now() - started} ms`);
  },
);
