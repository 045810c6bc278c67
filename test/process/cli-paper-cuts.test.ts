import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it, type TestContext } from 'node:test';
import { buildOpenApiDocument } from '../../src/api/openapi.js';
import { TOKEN_CACHE_TTL_MS } from '../../src/service/token-service.js';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { cleanEnv, LISTENING, type LogLine, ROOT } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// The paper cuts a newcomer met with the command line (issue #16), each as it was met: the
// built bin run as a process, from the repository or from another directory.

const BIN = join(ROOT, 'bin', 'plantstore');
const TOKEN = /^pst_[A-Za-z0-9_-]{43}$/;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface RunOptions {
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string;
}

/**
 * Runs the CLI to its end; fails the test if it has not ended within 20 s (a spinning
 * process is one of the cuts).
 */
async function run(args: string[], { cwd = ROOT, env = {}, stdin }: RunOptions = {}) {
  const child = spawn(process.execPath, [BIN, ...args], { cwd, env: { ...cleanEnv(), ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.stdin.end(stdin ?? '');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  assert.equal(signal, null, `plantstore ${args.join(' ')} did not end by itself: ${stderr}`);
  return { code, stdout, stderr } satisfies Run;
}

async function createToken(db: string, ...args: string[]): Promise<string> {
  const res = await run(['token', 'create', '--db', db, ...args]);
  assert.equal(res.code, 0, res.stderr);
  return res.stdout.trim();
}

async function listTokens(db: string): Promise<Record<string, unknown>[]> {
  const res = await run(['token', 'list', '--json', '--db', db]);
  assert.equal(res.code, 0, res.stderr);
  return res.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('commands that only read refuse a database that does not exist', () => {
  for (const [name, args] of [
    ['token list', ['token', 'list']],
    ['token list', ['token', 'list', '--json']],
    ['audit', ['audit']],
    ['token revoke', ['token', 'revoke', '1']],
  ] as const) {
    it(`${args.join(' ')} on a mistyped --db: exit 1, the path named, nothing created`, async (t) => {
      const dir = makeTempDir(t);
      const res = await run([...args, '--db', 'data/plantstor.db'], { cwd: dir });
      assert.equal(res.code, 1, res.stderr);
      assert.equal(res.stdout, '');
      const path = join(dir, 'data', 'plantstor.db');
      assert.equal(
        res.stderr,
        `plantstore: no plantstore database at ${path}; "${name}" creates none: ` +
          'check --db or --database-url, or create the database with "plantstore migrate"\n',
      );
      assert.deepEqual(readdirSync(dir), []);
    });
  }

  it('token list on a file plantstore never migrated: exit 1, the file untouched', async (t) => {
    const file = join(makeTempDir(t), 'other.db');
    writeFileSync(file, '');
    const res = await run(['token', 'list', '--db', file]);
    assert.equal(res.code, 1, res.stderr);
    assert.match(res.stderr, new RegExp(`^plantstore: no plantstore database in ${file};`));
    assert.equal(statSync(file).size, 0);
  });

  it('says where the path came from when PLANTSTORE_DB gave it', async (t) => {
    const db = join(makeTempDir(t), 'typo.db');
    const res = await run(['audit'], { env: { PLANTSTORE_DB: db } });
    assert.equal(res.code, 1, res.stderr);
    assert.match(
      res.stderr,
      new RegExp(`^plantstore: no plantstore database at ${db} \\(from PLANTSTORE_DB\\);`),
    );
    assert.equal(existsSync(db), false);
  });

  it(
    'PostgreSQL: token list on a schema plantstore never migrated is refused, and creates nothing',
    { skip: POSTGRES_SKIP },
    async (t) => {
      const url = await freshDatabase(t);
      const res = await run(['token', 'list', '--database-url', url]);
      assert.equal(res.code, 1, res.stderr);
      assert.match(
        res.stderr,
        /^plantstore: no plantstore database in PostgreSQL database "[^"]+", schema "t_[0-9a-f]+"; "token list" creates none/,
      );
      // Still nothing there: migrate applies every version, from the first.
      const migrated = await run(['migrate', '--database-url', url]);
      assert.match(migrated.stderr, /^applied 1, /);
    },
  );
});

describe('commands that write say which database they wrote to', () => {
  it('token create from another directory names the new database it made there', async (t) => {
    const elsewhere = makeTempDir(t);
    const first = await run(['token', 'create', '--name', 'ops'], { cwd: elsewhere });
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout.trim(), TOKEN);
    const path = join(elsewhere, 'data', 'plantstore.db');
    assert.equal(
      first.stderr,
      `created token 1 in the new SQLite database ${path}: scopes plants:read,plants:write, never expires\n`,
    );
    const second = await run(['token', 'create', '--expires-in', '1h'], { cwd: elsewhere });
    assert.match(
      second.stderr,
      new RegExp(
        `^created token 2 in SQLite database ${path}: scopes plants:read,plants:write, expires \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\n$`,
      ),
    );
  });

  it('token revoke and migrate name the database, and the variable that chose it', async (t) => {
    const db = join(makeTempDir(t), 'named.db');
    const env = { PLANTSTORE_DB: db };
    const migrated = await run(['migrate'], { env });
    assert.match(
      migrated.stderr,
      new RegExp(
        `^applied 1, .*; schema at version \\d+ in the new SQLite database ${db} \\(from PLANTSTORE_DB\\)\\n$`,
      ),
    );
    const again = await run(['migrate', '--db', db]);
    assert.match(
      again.stderr,
      new RegExp(`^schema already at version \\d+ in SQLite database ${db}\\n$`),
    );
    await createToken(db);
    const revoked = await run(['token', 'revoke', '1'], { env });
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal(
      revoked.stderr,
      `revoked token 1 in SQLite database ${db} (from PLANTSTORE_DB); running servers refuse it within ${TOKEN_CACHE_TTL_MS / 1000} s\n`,
    );
    const unknown = await run(['token', 'revoke', '7', '--db', db]);
    assert.equal(unknown.code, 1);
    assert.equal(unknown.stderr, `no token has id 7 in SQLite database ${db}\n`);
  });
});

/** Starts `serve --port 0`, returns its log lines up to "Server listening", and stops it. */
async function startUpLines(t: TestContext, args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', ...args], {
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

describe('token list --json', () => {
  it('is JSON Lines with null for what a token does not have', async (t) => {
    const db = join(makeTempDir(t), 'json.db');
    await createToken(db);
    await createToken(db, '--name', 'ci', '--expires-in', '30d');
    const [plain, named] = await listTokens(db);
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

describe('token revoke --token', () => {
  it('revokes the token it is given, found by its hash, and names it', async (t) => {
    const db = join(makeTempDir(t), 'leak.db');
    await createToken(db, '--name', 'keep');
    const leaked = await createToken(db, '--name', 'leaked');
    const res = await run(['token', 'revoke', '--token', leaked, '--db', db]);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(
      res.stderr,
      `revoked token 2 ("leaked") in SQLite database ${db}; running servers refuse it within ${TOKEN_CACHE_TTL_MS / 1000} s\n`,
    );
    assert.ok(!res.stderr.includes(leaked));
    const [keep, revoked] = await listTokens(db);
    assert.equal(keep!.revoked, null);
    assert.match(String(revoked!.revoked), /^\d{4}-/);
    const again = await run(['token', 'revoke', '--token', leaked, '--db', db]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stderr, `token 2 ("leaked") was already revoked in SQLite database ${db}\n`);
  });

  it('with - reads the token from stdin, keeping it off the command line', async (t) => {
    const db = join(makeTempDir(t), 'stdin.db');
    const leaked = await createToken(db, '--name', 'leaked');
    const res = await run(['token', 'revoke', '--token', '-', '--db', db], {
      stdin: `${leaked}\n`,
    });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /^revoked token 1 \("leaked"\) in /);
    assert.match(String((await listTokens(db))[0]!.revoked), /^\d{4}-/);
  });

  it('a token the database does not know: exit 1, nothing revoked', async (t) => {
    const db = join(makeTempDir(t), 'unknown.db');
    await createToken(db);
    const other = `pst_${'A'.repeat(43)}`;
    const res = await run(['token', 'revoke', '--token', other, '--db', db]);
    assert.equal(res.code, 1);
    assert.equal(
      res.stderr,
      `no token in SQLite database ${db} is the token given; nothing was revoked\n`,
    );
    assert.equal((await listTokens(db))[0]!.revoked, null);
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
      const res = await run(['token', 'revoke', ...args, '--db', db]);
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, message);
      assert.ok(!res.stderr.includes('hunter2'), 'the token given is echoed');
      assert.equal(existsSync(db), false);
    });
  }

  it('--help says when running servers refuse it, as docs/cli.md does', async () => {
    const res = await run(['token', 'revoke', '--help']);
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

describe('plantstore --version', () => {
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    version: string;
  };

  for (const flag of ['--version', '-V']) {
    it(`${flag} prints the package's version, which the served document declares too`, async () => {
      const res = await run([flag]);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(res.stdout, `${version}\n`);
      const info = buildOpenApiDocument().info as { version: string };
      assert.equal(info.version, version);
    });
  }
});

describe('a --db that cannot be a database fails at once, with a clear message', () => {
  it('under a file: exit 1, naming the file in the way', async (t) => {
    const dir = makeTempDir(t);
    writeFileSync(join(dir, 'afile'), '');
    for (const command of [['token', 'create'], ['migrate'], ['serve', '--port', '0']]) {
      const res = await run([...command, '--db', join(dir, 'afile', 'x.db')]);
      assert.equal(res.code, 1, `${command.join(' ')}: ${res.stderr}`);
      assert.equal(
        res.stderr,
        `plantstore: cannot create the database ${join(dir, 'afile', 'x.db')}: ${join(dir, 'afile')} is a file, not a directory\n`,
        command.join(' '),
      );
    }
  });

  it('a directory: exit 1, not a database', async (t) => {
    const dir = makeTempDir(t);
    mkdirSync(join(dir, 'db'));
    const res = await run(['token', 'create', '--db', join(dir, 'db')]);
    assert.equal(res.code, 1, res.stderr);
    assert.match(res.stderr, /is a directory, not a file\n$/);
  });

  it(
    'under /proc: exit 1 at once instead of spinning',
    { skip: !existsSync('/proc/self') && 'no /proc here' },
    async () => {
      for (const db of ['/proc/plantstore-test/x.db', '/proc/plantstore-test.db']) {
        const res = await run(['token', 'create', '--db', db]);
        assert.equal(res.code, 1, res.stderr);
        assert.match(
          res.stderr,
          new RegExp(`^plantstore: cannot create the database ${db}: ENOENT`),
        );
      }
    },
  );
});

describe('--expires-in', () => {
  it('0s is not "not a duration": it must be at least 1s', async (t) => {
    const db = join(makeTempDir(t), 'zero.db');
    for (const zero of ['0s', '0d', '00m']) {
      const res = await run(['token', 'create', '--db', db, '--expires-in', zero]);
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, /--expires-in must be at least 1s\n/);
      assert.doesNotMatch(res.stderr, /not a duration/);
    }
    assert.equal(existsSync(db), false);
  });
});
