import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { describeStore } from '../../src/store/open.js';

// How the CLI and the start-up line name a database: where it is, never its password.

test('a SQLite file is named by its absolute path', () => {
  assert.equal(
    describeStore({ db: 'data/plantstore.db' }),
    `SQLite database ${resolve('data/plantstore.db')}`,
  );
  assert.equal(describeStore({ db: ':memory:' }), 'SQLite database in memory');
});

test('a PostgreSQL URL is named by database, host and user, without the password', () => {
  const cases: [string, string][] = [
    [
      'postgres://app:s3cret@db.example:6543/plants',
      'PostgreSQL database "plants" on db.example:6543 as app',
    ],
    [
      'postgresql://app@[::1]/plants?password=s3cret',
      'PostgreSQL database "plants" on [::1] as app',
    ],
    [
      'postgres://app@/plants?host=/run/postgresql',
      'PostgreSQL database "plants" on /run/postgresql as app',
    ],
    ['postgres://db.example', 'PostgreSQL database (the default) on db.example'],
  ];
  for (const [url, named] of cases) {
    const described = describeStore({ db: 'ignored.db', databaseUrl: url });
    assert.equal(described, named, url);
    assert.doesNotMatch(described, /s3cret/);
  }
});
