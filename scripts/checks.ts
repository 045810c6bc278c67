// `npm run checks`: `npm run typecheck` and every `lint:*` script of package.json (what
// `npm run lint` runs one after another), side by side, as many at a time as there are CPUs:
// npm test runs them before the tests. Each one's output is shown whole when it ends, the
// failed ones' last; the exit code is 1 if any failed.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const { scripts } = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
  scripts: Record<string, string>;
};
const names = ['typecheck', ...Object.keys(scripts).filter((name) => name.startsWith('lint:'))];

interface Done {
  name: string;
  ok: boolean;
  output: string;
  ms: number;
}

function run(name: string): Promise<Done> {
  const started = Date.now();
  // npm's own script when npm runs this (npm_execpath), so the same npm runs each check.
  const npm = process.env.npm_execpath;
  const [command, args] = npm
    ? [process.execPath, [npm, 'run', '--silent', name]]
    : ['npm', ['run', '--silent', name]];
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.on('error', (error) => (output += `${error.message}\n`));
    child.on('close', (code) =>
      resolve({ name, ok: code === 0, output, ms: Date.now() - started }),
    );
  });
}

const queue = [...names];
const done: Done[] = [];
const worker = async () => {
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
    const result = await run(name);
    done.push(result);
    if (result.ok) {
      process.stdout.write(`${result.output}${name}: ok (${(result.ms / 1000).toFixed(1)} s)\n`);
    }
  }
};
await Promise.all(Array.from({ length: Math.min(availableParallelism(), names.length) }, worker));
const failed = done.filter((result) => !result.ok);
for (const { name, output } of failed) process.stderr.write(`${output}${name}: FAILED\n`);
if (failed.length > 0) process.exitCode = 1;
