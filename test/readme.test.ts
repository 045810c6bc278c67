import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { errorCatalogue, statusOf } from '../src/core/errors.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

test('the README lists every error of the catalogue, with its status and meaning', () => {
  for (const kind of Object.values(errorCatalogue)) {
    const row = `| ${kind.code} | ${statusOf(kind)} | ${kind.message} |`;
    assert.ok(readme.includes(row), `README.md is missing the row: ${row}`);
  }
});

test('the README lists no error code the catalogue does not have', () => {
  const codes = new Set<number>(Object.values(errorCatalogue).map((kind) => kind.code));
  const listed = [...readme.matchAll(/^\| (\d{5}) \|/gm)].map((match) => Number(match[1]));
  assert.ok(listed.length > 0);
  assert.deepEqual(
    listed.filter((code) => !codes.has(code)),
    [],
  );
});

test('the README starts with the commands a new user runs, in order', () => {
  const firstBlock = readme.split('```')[1] ?? '';
  const order = ['npm ci && npm start', 'TOKEN=$(./bin/plantstore token create)', 'npm test'];
  const positions = order.map((command) => firstBlock.indexOf(command));
  assert.ok(
    positions.every((p) => p >= 0),
    `first code block must contain ${order.join(', ')}`,
  );
  assert.deepEqual(
    [...positions].sort((a, b) => a - b),
    positions,
  );
});
