import assert from 'node:assert/strict';
import { test } from 'node:test';
import { progress } from '../../src/cli/progress.js';

function stream(isTTY: boolean, columns = 80) {
  const written: string[] = [];
  return { written, isTTY, columns, write: (text: string) => written.push(text) };
}

test('on a terminal: one line redrawn with a bar, at most once an interval, then cleared', () => {
  const out = stream(true);
  let now = 0;
  const bar = progress(out, { verb: 'imported', unit: 'lines', intervalMs: 100, now: () => now });
  bar.update(1, 0.25, '0 failed');
  now = 50;
  bar.update(2, 0.5, '0 failed');
  now = 150;
  bar.update(3, 1, '1 failed');
  bar.finish();
  assert.deepEqual(out.written, [
    '\r[######..................]  25% imported 1 lines, 0 failed\x1b[K',
    '\r[########################] 100% imported 3 lines, 1 failed\x1b[K',
    '\r\x1b[K',
  ]);
});

test('on a terminal: a count without a bar when the whole is unknown, cut to the width', () => {
  const out = stream(true, 20);
  const bar = progress(out, { verb: 'exported', unit: 'plants', now: () => 0 });
  bar.update(123456);
  assert.deepEqual(out.written, ['\rexported 123456 pla\x1b[K']);
});

test('elsewhere: a plain line every so many items, nothing to clear', () => {
  const out = stream(false);
  const bar = progress(out, { verb: 'exported', unit: 'plants', every: 1000 });
  for (const done of [400, 999, 1000, 1500, 2600, 2700]) bar.update(done);
  bar.finish();
  assert.deepEqual(out.written, ['exported 1000 plants\n', 'exported 2600 plants\n']);
});

test('the total said once, as the summary, where the last count already said it', () => {
  // `plants export` of 20000 plants into a pipe, stderr to a log: it said the total twice.
  const out = stream(false);
  const bar = progress(out, { verb: 'exported', unit: 'plants', every: 10_000 });
  for (let done = 1000; done <= 20_000; done += 1000) bar.update(done);
  bar.finish(20_000);
  assert.deepEqual(out.written, ['exported 10000 plants\n', 'exported 20000 plants\n']);

  const short = stream(false);
  const other = progress(short, { verb: 'exported', unit: 'plants', every: 10_000 });
  for (let done = 1000; done <= 12_000; done += 1000) other.update(done);
  other.finish(12_000);
  assert.deepEqual(short.written, ['exported 10000 plants\n', 'exported 12000 plants\n']);

  const terminal = stream(true);
  const drawn = progress(terminal, { verb: 'exported', unit: 'plants', now: () => 0 });
  drawn.update(20_000);
  drawn.finish(20_000);
  assert.deepEqual(terminal.written, [
    '\rexported 20000 plants\x1b[K',
    '\r\x1b[K',
    'exported 20000 plants\n',
  ]);
});

test('a terminal that never got a bar is left alone', () => {
  const out = stream(true);
  progress(out, { verb: 'exported', unit: 'plants' }).finish();
  assert.deepEqual(out.written, []);
});
