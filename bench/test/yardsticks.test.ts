import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { openSqlite } from '../yardsticks/sqlite.js';
import { makeTempDir } from '../../test/helpers/temp-dir.js';
import {
  pageAnswer,
  parseInt64,
  parseListQuery,
  plantJson,
  TokenCheck,
  validPlant,
} from '../yardsticks/common.js';

// The yardsticks' shared answers: they must give what plantstore gives for the benchmarked
// operations (the harness also compares live answers before each group).

describe('TokenCheck', () => {
  const hashes: string[] = [];
  const check = new TokenCheck([{ hash: 'h:good', scopes: 'plants:read plants:write' }], (t) => {
    hashes.push(t);
    return `h:${t}`;
  });

  it('refuses a missing or malformed header with 401 and the realm', () => {
    for (const header of [undefined, 'Basic abc', 'Bearer', 'Bearer a b']) {
      const refusal = check.refusal(header, 'plants:read');
      assert.equal(refusal?.status, 401);
      assert.equal(refusal?.headers['www-authenticate'], 'Bearer realm="plantstore"');
      assert.match(refusal?.body ?? '', /"error":40102/);
    }
  });

  it('refuses an unknown token with invalid_token, and a missing scope with 403', () => {
    const unknown = check.refusal('Bearer nope', 'plants:read');
    assert.equal(unknown?.status, 401);
    assert.match(unknown?.headers['www-authenticate'] ?? '', /error="invalid_token"/);
    const scoped = new TokenCheck([{ hash: 'h:r', scopes: 'plants:read' }], (t) => `h:${t}`);
    assert.equal(scoped.refusal('bearer r', 'plants:write')?.status, 403);
    assert.equal(scoped.refusal('bearer r', 'plants:read'), undefined);
  });

  it('hashes a known token once, then knows it by itself', () => {
    hashes.length = 0;
    assert.equal(check.refusal('Bearer good', 'plants:write'), undefined);
    assert.equal(check.refusal('BEARER  good', 'plants:read'), undefined);
    assert.deepEqual(hashes, ['good']);
  });
});

describe('answers', () => {
  it('writes plants with exact ids, the tag only when there is one', () => {
    assert.equal(
      plantJson({ id: 9223372036854775807n, name: 'a "b"', tag: null }),
      '{"id":9223372036854775807,"name":"a \\"b\\""}',
    );
    assert.equal(
      plantJson({ id: '12', name: 'x', tag: 'shade' }),
      '{"id":12,"name":"x","tag":"shade"}',
    );
  });

  it('links the next page when one more row than the limit came back', () => {
    const rows = [1n, 2n, 3n].map((id) => ({ id, name: `plant ${id}`, tag: null }));
    const page = pageAnswer(rows, 2);
    assert.equal(page.headers.link, '</plants?limit=2&after=2>; rel="next"');
    assert.equal(page.body, '[{"id":1,"name":"plant 1"},{"id":2,"name":"plant 2"}]\n');
    assert.equal(pageAnswer(rows.slice(0, 2), 2).headers.link, undefined);
  });

  it('reads ids and list queries as plantstore does', () => {
    assert.equal(parseInt64('-9223372036854775808'), -(2n ** 63n));
    for (const bad of ['9223372036854775808', '01', '-0', '+1', '1.0', '']) {
      assert.equal(parseInt64(bad), undefined, bad);
    }
    assert.deepEqual(parseListQuery('limit=100'), { limit: 100 });
    assert.deepEqual(parseListQuery('after=-5'), { limit: 100, after: -5n });
    assert.equal(parseListQuery('limit=1001'), undefined);
    assert.deepEqual(parseListQuery('tag=shade&limit=100'), { limit: 100, tag: 'shade' });
    assert.equal(parseListQuery(`tag=${'x'.repeat(51)}`), undefined);
    assert.equal(parseListQuery('tag='), undefined);
    assert.equal(parseListQuery('name=x'), undefined);
  });

  it('keeps the tag filter in the next page’s link, encoded as plantstore encodes it', () => {
    const rows = [1n, 2n].map((id) => ({ id, name: `plant ${id}`, tag: 'a b+c' }));
    assert.equal(
      pageAnswer(rows, 1, 'a b+c').headers.link,
      '</plants?limit=1&after=1&tag=a%20b%2Bc>; rel="next"',
    );
  });

  it('takes a create body with a name and an optional tag, nothing else', () => {
    assert.equal(validPlant({ name: 'Bench plant', tag: 'shade' }), true);
    assert.equal(validPlant({ name: '  ' }), false);
    assert.equal(validPlant({ name: 'a', id: 1 }), false);
    assert.equal(validPlant([]), false);
  });
});

describe('the SQLite yardsticks’ creates', () => {
  it('leave the automatic checkpoint to keep the WAL small', (t) => {
    const file = join(makeTempDir(t), 'y.db');
    const setup = new Database(file);
    setup.exec(`CREATE TABLE plants (id INTEGER PRIMARY KEY, name TEXT NOT NULL, tag TEXT);
      CREATE TABLE tokens (hash TEXT, scopes TEXT, revoked_at INTEGER, expires_at INTEGER);`);
    setup.close();
    const { db, create } = openSqlite(file);
    t.after(() => db.close());
    for (let i = 0; i < 3000; i++) assert.equal(create('Fern', null).name, 'Fern');
    // SQLite checkpoints at 1,000 pages (4 MB) and then writes the WAL from its start again;
    // with the checkpoint skipped, 3,000 commits leave it at about 12 MB.
    assert.ok(statSync(`${file}-wal`).size < 8_000_000, `${statSync(`${file}-wal`).size} bytes`);
  });
});
