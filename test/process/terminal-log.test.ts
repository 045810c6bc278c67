import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { cleanEnv, ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// `npm start` (`plantstore serve`) logs lines for a person on a terminal, JSON lines elsewhere.

const SCRIPT = '/usr/bin/script';
const noTerminal = existsSync(SCRIPT) ? false : `SKIPPED: ${SCRIPT} (util-linux) is missing`;
if (noTerminal) console.warn(`\n*** terminal-log.test.ts ${noTerminal} ***\n`);

const ESC = '\u001b';
const ANSI = new RegExp(`${ESC}\\[[0-9;]*m`, 'g');

test('on a terminal, serve logs readable lines, in colour', { skip: noTerminal }, async (t) => {
  const db = join(makeTempDir(t), 'tty.db');
  // script(1) gives serve a pseudo-terminal as its standard output, as `npm start` in a shell.
  const command = `${process.execPath} bin/plantstore serve --db ${db} --port 0`;
  const child = spawn(SCRIPT, ['-qec', command, '/dev/null'], { cwd: ROOT, env: cleanEnv() });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  t.after(() => clearTimeout(timer));
  let out = '';
  const listening = new Promise<string>((resolve) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out.replace(ANSI, ''));
      if (url) resolve(url[1]!);
    });
  });
  const url = await listening;
  assert.equal((await fetch(`${url}/healthz`)).status, 200);
  // Ctrl-C on the terminal: serve stops, and logs that it does.
  child.stdin.write('\x03');
  await once(child, 'close');
  assert.ok(out.includes(`${ESC}[32mINFO ${ESC}[0m`), 'the level in colour');
  // The terminal echoes the Ctrl-C as ^C: its own, not the log's.
  const lines = out
    .replace(ANSI, '')
    .replace(/\r|\^C/g, '')
    .trimEnd()
    .split('\n');
  const time = String.raw`\d\d:\d\d:\d\d\.\d{3}`;
  assert.match(lines.join('\n'), new RegExp(`^${time} INFO  Server listening at ${url}$`, 'm'));
  assert.match(
    lines.join('\n'),
    new RegExp(
      `^${time} INFO  request reqId=\\S+ method=GET route=/healthz url=/healthz status=200 `,
      'm',
    ),
  );
  assert.match(lines.join('\n'), new RegExp(`^${time} INFO  shutting down signal=SIGINT$`, 'm'));
  for (const line of lines) assert.match(line, new RegExp(`^${time} [A-Z]{4,5} +\\S`), line);
});

test('elsewhere (a pipe), serve logs JSON lines', async (t) => {
  const server = await startServer(t, ['--db', join(makeTempDir(t), 'pipe.db')]);
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
  await server.waitForLog((line) => line.msg === 'request', 'the request line');
  // The helper parses every line as JSON, and marks any line that is not.
  assert.deepEqual(
    server.logs.filter((line) => line.msg?.startsWith('(not JSON)')),
    [],
  );
  assert.ok(server.logs.every((line) => typeof line.level === 'number'));
});
