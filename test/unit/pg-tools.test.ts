import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BackupError } from '../../src/store/backup.js';
import { toolConnection } from '../../src/store/postgres/pg-tools.js';

// The URL PostgreSQL's tools get on their command lines (which `ps` shows every user of the
// machine) never holds the password: it goes in PGPASSWORD.

test('the password of a URL goes to PGPASSWORD, the rest of the URL as written', () => {
  const options = 'options=-c%20search_path%3D%22Store%22';
  const user = toolConnection(`postgres://app:s%40cret@db:5432/plants?${options}`);
  assert.equal(user.url, `postgres://app@db:5432/plants?${options}`);
  assert.equal(user.env.PGPASSWORD, 's@cret');
  const param = toolConnection(`postgres://app@db/plants?password=p%26w&${options}`);
  assert.equal(param.url, `postgres://app@db/plants?${options}`);
  assert.equal(param.env.PGPASSWORD, 'p&w');
  const none = toolConnection('postgres://app@db/plants');
  assert.equal(none.url, 'postgres://app@db/plants');
  assert.equal(none.env.PGPASSWORD, process.env.PGPASSWORD);
});

test('a URL the tools could not be given safely is refused in words', () => {
  assert.throws(
    () => toolConnection('postgres://app:pw@/plants?host=/run/postgresql'),
    (error) =>
      error instanceof BackupError && /postgres:\/\/user:password@host/.test(error.message),
  );
});
