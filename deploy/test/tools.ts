import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';

// What the deploy tests share: running outside tools, and skipping only where allowed.

/**
 * In CI (CI=true, as .ci/run runs) or with PLANTSTORE_DEPLOY_TESTS=required, a tool that
 * cannot run fails the tier; elsewhere the tests that need it are skipped, loudly.
 */
export const REQUIRED =
  process.env.CI === 'true' || process.env.PLANTSTORE_DEPLOY_TESTS === 'required';

/**
 * `false` when `problem` is undefined; otherwise a loud skip reason, or, where skipping is
 * not allowed, an error thrown at load time so the tier fails.
 */
export function skipUnless(file: string, problem: string | undefined): false | string {
  if (problem === undefined) return false;
  if (REQUIRED) {
    throw new Error(`${file}: ${problem} (CI=true: the deploy tests must run here)`);
  }
  const reason = `SKIPPED: ${problem}`;
  console.warn(`\n*** ${file} ${reason} ***\n`);
  return reason;
}

/** Why `command args` cannot run here, or undefined when it exits 0. */
export function cannotRun(command: string, args: string[]): string | undefined {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 60_000 });
  if (result.error) return `${command} cannot run: ${result.error.message}`;
  if (result.status !== 0) {
    return `${command} ${args.join(' ')} exits ${result.status}: ${result.stderr.trim()}`;
  }
  return undefined;
}

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end (killed after `timeoutMs`); never rejects on its exit code. */
export function run(
  command: string,
  args: string[],
  options: { timeoutMs?: number; env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: options.env ?? process.env,
      ...(options.cwd !== undefined && { cwd: options.cwd }),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Like `run`, but rejects unless the command exits 0; resolves with its stdout. */
export async function check(
  command: string,
  args: string[],
  options: { timeoutMs?: number; env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<string> {
  const ran = await run(command, args, options);
  if (ran.code !== 0) {
    const tail = (ran.stdout + ran.stderr).split('\n').slice(-40).join('\n');
    throw new Error(`${command} ${args.join(' ')} exited ${ran.code ?? ran.signal}:\n${tail}`);
  }
  return ran.stdout;
}

/** A TCP port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

/** The environment variables `plantstore serve --help` says it reads. */
export function serveEnvironmentNames(help: string): Set<string> {
  return new Set([...help.matchAll(/env:\s+([A-Z_]+)\)/g)].map((match) => match[1]!));
}
