import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { buildOpenApiDocument } from '../../src/api/openapi.js';
import { TOKEN_CACHE_TTL_MS } from '../../src/service/token-service.js';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';
import { ROOT, runCli as run } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// What every command of the built CLI does alike: the database it opens (one that only reads
// creates none; the one that writes says which), a --db that cannot be one, --help and
// --version. Run as a process, from the repository or from another directory. Each command's
// own behaviour is in its suite: token-cli, plants-cli, audit-prune, backup, serve-options.

const TOKEN = /^pst_[A-Za-z0-9_-]{43}$/;

async function createToken(db: string, ...args: string[]): Promise<string> {
  const res = await run(['token', 'create', '--db', db, ...args]);
  assert.equal(res.code, 0, res.stderr);
  return res.stdout.trim();
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
      const res = await run([...command, '--help']);
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stdout, new RegExp(`^Usage: plantstore ${command.join(' ')}`.trimEnd()));
    });
  }
});

describe('a usage error', () => {
  for (const [args, error, command] of [
    [['serve', '--durability', 'foo'], /argument 'foo' is invalid/, 'plantstore serve'],
    [['webhooks', 'create', '--nope'], /unknown option '--nope'/, 'plantstore webhooks create'],
    [['nope'], /unknown command 'nope'/, 'plantstore'],
  ] as const) {
    it(`${args.join(' ')}: the error, then where the help is, not the help (exit 2)`, async () => {
      const res = await run([...args]);
      assert.equal(res.code, 2, res.stderr);
      const lines = res.stderr.trimEnd().split('\n');
      assert.match(lines[0]!, error);
      assert.deepEqual(lines.slice(1), [`(${command} --help lists the options)`]);
      assert.equal(res.stdout, '');
    });
  }
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
