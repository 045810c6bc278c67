import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { hashToken } from '../../src/core/tokens.js';
import { TOKEN_CACHE_TTL_MS } from '../../src/service/token-service.js';
import { ROOT, runCli } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// `plantstore token create | list | revoke`, the built CLI as a user runs it from the
// repository root.

const TOKEN = /^pst_[A-Za-z0-9_-]{43}$/;
const DAY_MS = 86_400_000;

/** Runs the CLI; the environment has no PLANTSTORE_DB unless `env` gives one. */
const cli = (args: string[], env: Record<string, string> = {}) => runCli(args, { env });

interface ListedToken {
  id: number;
  name: string | null;
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

  it('refuses --expires-in 0s as under 1s, not as "not a duration"', async (t) => {
    const db = join(makeTempDir(t), 'zero.db');
    for (const zero of ['0s', '0d', '00m']) {
      const res = await cli(['token', 'create', '--db', db, '--expires-in', zero]);
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, /--expires-in must be at least 1s\n/);
      assert.doesNotMatch(res.stderr, /not a duration/);
    }
    assert.equal(existsSync(db), false);
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

  it('--json is JSON Lines with null for what a token does not have', async (t) => {
    const db = join(makeTempDir(t), 'json.db');
    await createToken(db);
    await createToken(db, '--name', 'ci', '--expires-in', '30d');
    const [plain, named] = await listJson(db);
    assert.deepEqual(
      { ...plain, created: typeof plain!.created },
      {
        id: 1,
        name: null,
        scopes: ['plants:read', 'plants:write'],
        created: 'string',
        expires: null,
        lastUsed: null,
        revoked: null,
      },
    );
    assert.equal(named!.name, 'ci');
    assert.match(String(named!.expires), /^\d{4}-\d\d-\d\dT[\d:.]+Z$/);
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

  it('--token revokes the token it is given, found by its hash, and names it', async (t) => {
    const db = join(makeTempDir(t), 'leak.db');
    await createToken(db, '--name', 'keep');
    const leaked = await createToken(db, '--name', 'leaked');
    const res = await cli(['token', 'revoke', '--token', leaked, '--db', db]);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(
      res.stderr,
      `revoked token 2 ("leaked") in SQLite database ${db}; running servers refuse it within ${TOKEN_CACHE_TTL_MS / 1000} s\n`,
    );
    assert.ok(!res.stderr.includes(leaked));
    const [keep, revoked] = await listJson(db);
    assert.equal(keep!.revoked, null);
    assert.match(String(revoked!.revoked), /^\d{4}-/);
    const again = await cli(['token', 'revoke', '--token', leaked, '--db', db]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stderr, `token 2 ("leaked") was already revoked in SQLite database ${db}\n`);
  });

  it('--token - reads the token from stdin, keeping it off the command line', async (t) => {
    const db = join(makeTempDir(t), 'stdin.db');
    const leaked = await createToken(db, '--name', 'leaked');
    const res = await runCli(['token', 'revoke', '--token', '-', '--db', db], {
      stdin: `${leaked}\n`,
    });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /^revoked token 1 \("leaked"\) in /);
    assert.match(String((await listJson(db))[0]!.revoked), /^\d{4}-/);
  });

  it('--token with a token the database does not know: exit 1, nothing revoked', async (t) => {
    const db = join(makeTempDir(t), 'unknown.db');
    await createToken(db);
    const other = `pst_${'A'.repeat(43)}`;
    const res = await cli(['token', 'revoke', '--token', other, '--db', db]);
    assert.equal(res.code, 1);
    assert.equal(
      res.stderr,
      `no token in SQLite database ${db} is the token given; nothing was revoked\n`,
    );
    assert.equal((await listJson(db))[0]!.revoked, null);
  });

  for (const [what, args, message] of [
    [
      'not a token',
      ['--token', 'hunter2'],
      /^error: what --token gave is not a plantstore token \(pst_ and 43 characters\)\n/,
    ],
    ['an empty stdin', ['--token', '-'], /^error: what --token gave is not a plantstore token/],
    [
      'neither id nor --token',
      [],
      /^error: say which token to revoke: its id \(token list shows it\), or --token\n/,
    ],
    [
      'both id and --token',
      ['1', '--token', `pst_${'A'.repeat(43)}`],
      /^error: give the id of the token to revoke or --token, not both\n/,
    ],
  ] as const) {
    it(`${what}: exit 2 and a message, nothing opened`, async (t) => {
      const db = join(makeTempDir(t), 'usage.db');
      const res = await cli(['token', 'revoke', ...args, '--db', db]);
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, message);
      assert.ok(!res.stderr.includes('hunter2'), 'the token given is echoed');
      assert.equal(existsSync(db), false);
    });
  }

  it('--help says when running servers refuse a revoked token, as docs/cli.md does', async () => {
    const res = await cli(['token', 'revoke', '--help']);
    assert.equal(res.code, 0, res.stderr);
    const help = res.stdout.replace(/\s+/g, ' ');
    assert.match(
      help,
      new RegExp(`running servers refuse it within ${TOKEN_CACHE_TTL_MS / 1000} s`),
    );
    assert.doesNotMatch(help, /next request/);
    const page = readFileSync(join(ROOT, 'docs', 'cli.md'), 'utf8').replace(/\s+/g, ' ');
    assert.match(page, new RegExp(`within ${TOKEN_CACHE_TTL_MS / 1000} seconds`));
  });
});
