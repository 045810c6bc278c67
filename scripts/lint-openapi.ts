// `npm run lint:openapi`: Redocly's lint of openapi.json (or of the file given), with the
// rules of redocly.yaml, quiet when it passes. Redocly CLI 2.77 prints a boxed "Node.js 20
// support is ending" notice on every run on Node 20, before it reads any option, variable
// or config, and none turns it off; so its output is shown whole only when the lint fails
// (the notice then too), and a pass is one line. No update check: the variable below.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const file = process.argv[2] ?? 'openapi.json';
const redocly = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');
const lint = spawnSync(process.execPath, [redocly, 'lint', file], {
  cwd: root,
  encoding: 'utf8',
  env: { ...process.env, REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
});
if (lint.status === 0) {
  process.stdout.write(`${file}: valid (redocly lint, redocly.yaml)\n`);
} else {
  process.stderr.write(lint.error ? `${lint.error.message}\n` : `${lint.stdout}${lint.stderr}`);
  process.exitCode = 1;
}
