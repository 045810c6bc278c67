import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { hashToken } from '../../src/core/tokens.js';
import { makeTempDir } from '../helpers/setup.js';

// The built CLI as a user runs it: `node bin/plantstore ...` from the repository root.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = /^pst_[A-Za-z0-9_-]{43}$/;
const DAY_MS = 86_400_000;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI; the environment has no PLANTSTORE_DB unless `env` gives one. */
function cli(args: string[], env: Record<string, string> = {}): Promise<Result> {
  const base = { ...process.env };
  delete base.PLANTSTORE_DB;
  delete base.DATABASE_URL;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/plantstore', ...args], {
      cwd: ROOT,
      env: { ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

interface ListedToken {
  id: number;
  name: string;
  scopes: string[];
  created: string;
  expires: string | null;
  lastUsed: string | null;
  revoked: string | null;
}

async function listJson(db: string): Promise<ListedToken[]> {
  const res = await cli(['token', 'list', '--json', '--db', db]);
  assert.equal(res.code, 0, res.stderr);
  return res.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as ListedToken);
}

async function createToken(db: string, ...args: string[]): Promise<string> {
  const res = await cli(['token', 'create', '--db', db, ...args]);
  assert.equal(res.code, 0, res.stderr);
  return res.stdout.trimEnd();
}

describe('plantstore token create', () => {
  it('prints exactly one line, the token, and exits 0', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    const res = await cli(['token', 'create', '--db', db]);
    assert.equal(res.code, 0, res.stderr);
    assert.ok(res.stdout.endsWith('\n'));
    const lines = res.stdout.slice(0, -1).split('\n');
    assert.equal(lines.length, 1, res.stdout);
    assert.match(lines[0]!, TOKEN);
  });

  it('gives a new token each time', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    const first = await createToken(db);
    const second = await createToken(db);
    assert.notEqual(first, second);
    assert.equal((await listJson(db)).length, 2);
  });

  it('creates the database and its directory when missing', async (t) => {
    const db = join(makeTempDir(t), 'not', 'yet', 'there.db');
    assert.equal(existsSync(db), false);
    assert.match(await createToken(db), TOKEN);
    assert.ok(existsSync(db));
  });

  it('creates them readable by its user only (0700, 0600) under the usual umask 022', async (t) => {
    const previous = process.umask(0o022); // inherited by the CLI's process
    t.after(() => process.umask(previous));
    const top = join(makeTempDir(t), 'data');
    const db = join(top, 'plantstore.db');
    assert.match(await createToken(db), TOKEN);
    const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);
    assert.deepEqual([top, db].map(mode), ['700', '600']);
  });

  it('gives plants:read and plants:write by default, with no expiry', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    await createToken(db);
    const [listed] = await listJson(db);
    assert.deepEqual(listed?.scopes, ['plants:read', 'plants:write']);
    assert.equal(listed?.expires, null);
  });

  it('honours PLANTSTORE_DB when --db is not given', async (t) => {
    const dir = makeTempDir(t);
    const db = join(dir, 'from-env.db');
    const res = await cli(['token', 'create', '--name', 'env'], { PLANTSTORE_DB: db });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout.trimEnd(), TOKEN);
    assert.ok(existsSync(db));
    assert.deepEqual(
      (await listJson(db)).map((token) => token.name),
      ['env'],
    );
    const listed = await cli(['token', 'list', '--json'], { PLANTSTORE_DB: db });
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /"name":"env"/);
  });

  for (const scopes of ['plants:nope', '', 'plants:read,,plants:write', 'a,,b']) {
    it(`refuses --scopes ${JSON.stringify(scopes)} with exit 2 and a message`, async (t) => {
      const db = join(makeTempDir(t), 'cli.db');
      const res = await cli(['token', 'create', '--db', db, '--scopes', scopes]);
      assert.equal(res.code, 2, res.stderr);
      assert.equal(res.stdout, '');
      assert.match(res.stderr, /scope/i);
    });
  }

  for (const expiresIn of ['3x', '0d', '-1d', '30', 'd', '1.5d']) {
    it(`refuses --expires-in ${expiresIn} with exit 2 and a message`, async (t) => {
      const db = join(makeTempDir(t), 'cli.db');
      const res = await cli(['token', 'create', '--db', db, `--expires-in=${expiresIn}`]);
      assert.equal(res.code, 2, res.stderr);
      assert.equal(res.stdout, '');
      assert.match(res.stderr, /duration|expires/i);
    });
  }

  it('refuses --expires-in -1d given as a separate argument with exit 2', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    const res = await cli(['token', 'create', '--db', db, '--expires-in', '-1d']);
    assert.equal(res.code, 2, res.stderr);
    assert.equal(res.stdout, '');
    assert.notEqual(res.stderr.trim(), '');
  });
});

describe('plantstore token list', () => {
  it('--json shows scopes, name, dates and revocation, never the token or its hash', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    const before = Date.now();
    const token = await createToken(
      db,
      '--scopes',
      'plants:read',
      '--name',
      'reader',
      '--expires-in',
      '30d',
    );
    const after = Date.now();
    const res = await cli(['token', 'list', '--json', '--db', db]);
    assert.equal(res.code, 0, res.stderr);
    assert.ok(!res.stdout.includes(token), 'the token is listed');
    assert.ok(!res.stdout.includes(token.slice(4)), 'the token is listed');
    assert.ok(!res.stdout.includes(hashToken(token)), 'the hash is listed');
    const [listed, ...rest] = await listJson(db);
    assert.deepEqual(rest, []);
    assert.deepEqual(Object.keys(listed!).sort(), [
      'created',
      'expires',
      'id',
      'lastUsed',
      'name',
      'revoked',
      'scopes',
    ]);
    assert.equal(listed?.name, 'reader');
    assert.deepEqual(listed?.scopes, ['plants:read']);
    const created = Date.parse(listed!.created);
    assert.ok(created >= before - 1 && created <= after + 1, listed!.created);
    const expires = Date.parse(String(listed!.expires));
    assert.ok(Math.abs(expires - created - 30 * DAY_MS) < 5_000, String(listed!.expires));
    assert.equal(listed?.lastUsed, null);
    assert.equal(listed?.revoked, null);
  });

  it('prints a table with a header and one row per token, never the token', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    const token = await createToken(db, '--name', 'first');
    await createToken(db, '--name', 'second', '--scopes', 'plants:write');
    const res = await cli(['token', 'list', '--db', db]);
    assert.equal(res.code, 0, res.stderr);
    const lines = res.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 3, res.stdout);
    assert.match(lines[0]!, /^ID\s+NAME\s+SCOPES\s+CREATED\s+EXPIRES\s+LAST USED\s+REVOKED$/);
    assert.match(lines[1]!, /^1\s+first\s+plants:read,plants:write\s/);
    assert.match(lines[2]!, /^2\s+second\s+plants:write\s/);
    assert.ok(!res.stdout.includes(token));
    assert.ok(!res.stdout.includes(hashToken(token)));
  });

  it('escapes terminal controls in a name in the table, and keeps it exact in --json', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    const name = 'ops\u009b2J\u001b]0;pwned\u0007\u202Eevil';
    await createToken(db, '--name', name);
    const res = await cli(['token', 'list', '--db', db]);
    assert.equal(res.code, 0, res.stderr);
    assert.doesNotMatch(res.stdout.replaceAll('\n', ''), /[\p{Cc}\p{Cf}\u2028\u2029]/u);
    assert.match(
      res.stdout,
      /\n1 +ops\\u\{9b\}2J\\u\{1b\}\]0;pwned\\u\{7\}\\u\{202e\}evil +plants:/,
    );
    assert.equal((await listJson(db))[0]?.name, name);
  });

  it('on a database without tokens prints nothing to --json', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    assert.equal((await cli(['migrate', '--db', db])).code, 0);
    assert.deepEqual(await listJson(db), []);
  });
});

describe('plantstore token revoke', () => {
  it('revokes a token: exit 0, and list shows when', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    await createToken(db, '--name', 'keep');
    await createToken(db, '--name', 'drop');
    const [, drop] = await listJson(db);
    const before = Date.now();
    const res = await cli(['token', 'revoke', String(drop!.id), '--db', db]);
    assert.equal(res.code, 0, res.stderr);
    const [keep, dropped] = await listJson(db);
    assert.equal(keep?.revoked, null);
    assert.ok(Date.parse(String(dropped!.revoked)) >= before - 1, String(dropped?.revoked));
  });

  it('revoking an unknown id exits 1 with a message', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    await createToken(db);
    const res = await cli(['token', 'revoke', '99', '--db', db]);
    assert.equal(res.code, 1);
    assert.match(res.stderr, /99/);
    assert.equal((await listJson(db))[0]?.revoked, null);
  });

  it('a malformed id exits 2 with a message', async (t) => {
    const db = join(makeTempDir(t), 'cli.db');
    const res = await cli(['token', 'revoke', 'abc', '--db', db]);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /abc/);
  });
});

describe('plantstore --help', () => {
  for (const command of [
    [],
    ['serve'],
    ['token'],
    ['token', 'create'],
    ['token', 'list'],
    ['token', 'revoke'],
  ]) {
    it(`${['plantstore', ...command].join(' ')} --help exits 0 with usage`, async () => {
      const res = await cli([...command, '--help']);
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stdout, new RegExp(`^Usage: plantstore ${command.join(' ')}`.trimEnd()));
    });
  }
});
