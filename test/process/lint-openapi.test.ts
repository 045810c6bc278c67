import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// `npm run lint:openapi` inside `npm test`: Redocly's lint, without the boxed notice Redocly
// CLI prints on every run on Node 20, and with Redocly's whole report when the lint fails.

function lintOpenapi(args: string[] = []) {
  return new Promise<{ code: number; output: string }>((resolve) => {
    execFile(
      'npm',
      ['run', '--silent', 'lint:openapi', '--', ...args],
      { cwd: ROOT },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, output: stdout + stderr }),
    );
  });
}

test('lint:openapi passes openapi.json in one line, no Node.js 20 banner', async () => {
  const { code, output } = await lintOpenapi();
  assert.equal(code, 0, output);
  assert.equal(output, 'openapi.json: valid (redocly lint, redocly.yaml)\n');
});

test("lint:openapi fails a broken document with Redocly's report", async (t) => {
  const file = join(makeTempDir(t), 'broken.json');
  writeFileSync(file, '{"openapi":"3.1.0","info":{"title":"x"},"paths":{}}\n');
  const { code, output } = await lintOpenapi([file]);
  assert.equal(code, 1, output);
  assert.match(output, /The field `version` must be present on this level\./);
  assert.match(output, /no-empty-servers/);
});
