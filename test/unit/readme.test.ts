import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { errorCatalogue, statusOf } from '../../src/core/errors.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const api = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');

/** Table rows as trimmed cells, so column padding by a formatter does not matter. */
const rows = api
  .split('\n')
  .filter((line) => line.startsWith('|'))
  .map((line) =>
    line
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim())
      .join(' | '),
  );

test('docs/api.md lists every error of the catalogue, with its status and meaning', () => {
  for (const kind of Object.values(errorCatalogue)) {
    const row = `${kind.code} | ${statusOf(kind)} | ${kind.message}`;
    assert.ok(rows.includes(row), `docs/api.md is missing the row: | ${row} |`);
  }
});

test('docs/api.md lists no error code the catalogue does not have', () => {
  const codes = new Set<number>(Object.values(errorCatalogue).map((kind) => kind.code));
  const listed = rows.filter((row) => /^\d{5} \|/.test(row)).map((row) => Number(row.slice(0, 5)));
  assert.ok(listed.length > 0);
  assert.deepEqual(
    listed.filter((code) => !codes.has(code)),
    [],
  );
});

test('the README starts with the commands a new user runs, in order', () => {
  const [, first = '', , calling = ''] = readme.split('```');
  // Its first lines are the two commands, and nothing else: pasted as one block, anything
  // after `npm start` would wait for the server to stop.
  const commands = first
    .split('\n')
    .slice(1)
    .map((line) => line.replace(/#.*/, '').trim())
    .filter((line) => line !== '');
  assert.deepEqual(commands, ['npm ci && npm start', 'npm test']);
  // The calls begin with their token.
  const calls = calling
    .split('\n')
    .slice(1)
    .filter((line) => line.trim() !== '');
  assert.equal(calls[0], 'TOKEN=$(./bin/plantstore token create)');
});
