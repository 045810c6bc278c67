import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as wait } from 'node:timers/promises';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';

// Real plantstore processes for the end-to-end suites: `serve` started and stopped
// around a test, and the CLI run to completion.

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The environment without the variables the CLI reads, so only the arguments count. */
export function cleanEnv(): NodeJS.ProcessEnv {
  const cli = new Set([
    'HOST',
    'PORT',
    'PLANTSTORE_DB',
    'DATABASE_URL',
    'LOG_LEVEL',
    'PLANTSTORE_WORKERS',
    'PLANTSTORE_DURABILITY',
    'PLANTSTORE_POOL_SIZE',
    'PLANTSTORE_MAX_CONNECTIONS',
    'PLANTSTORE_REQUEST_TIMEOUT',
    'PLANTSTORE_HEADERS_TIMEOUT',
    'PLANTSTORE_KEEP_ALIVE_TIMEOUT',
    'PLANTSTORE_SEND_TIMEOUT',
    'PLANTSTORE_SHUTDOWN_GRACE',
    'PLANTSTORE_CORS_ORIGINS',
    'PLANTSTORE_RATE_LIMIT',
    'PLANTSTORE_AUTH_FAILURE_LIMIT',
    'PLANTSTORE_TRUST_PROXY',
    'PLANTSTORE_WEBHOOK_TIMEOUT',
    'PLANTSTORE_WEBHOOK_RETRY_SCHEDULE',
    'PLANTSTORE_WEBHOOK_ALLOW_NETWORKS',
    'PLANTSTORE_WEBHOOK_DISABLE_AFTER',
    'PLANTSTORE_WEBHOOK_RETENTION',
    'PLANTSTORE_EVENTS_RETENTION',
    'PLANTSTORE_MAX_EVENT_STREAMS',
  ]);
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !cli.has(name)));
}

/**
 * Waits, if need be, until the current day (UTC) has more than `ms` left, so a test using
 * day-long rate-limit windows cannot see its window end halfway. (A server process runs on
 * the real clock; a test in-process gives the app a clock instead.)
 */
export async function awayFromMidnight(ms: number): Promise<void> {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  // A timer that keeps the process alive: called before any server is started, the wait may
  // be all there is, and with `sleep`'s the test process ran out of work and node:test
  // cancelled the test (CI at 23:59 UTC, 2026-11-29).
  if (left < ms) await wait(left + 100);
}

/** Resolves after `ms` without keeping the test process alive. */
export const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

export interface LogLine {
  msg?: string;
  pid?: number;
  [key: string]: unknown;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Server {
  child: ChildProcessWithoutNullStreams;
  url: string;
  /** Every JSON line logged so far. */
  logs: LogLine[];
  exited: Promise<Exit>;
  /** Resolves with the first logged line that `match` accepts. */
  waitForLog(match: (line: LogLine) => boolean, what?: string, ms?: number): Promise<LogLine>;
}

export const LISTENING = /^Server listening at (http:\/\/\S+)$/;

/**
 * Starts `plantstore serve --port 0 <args>` and resolves when it logs where it listens.
 * The process (and `extraPids`, filled in by the test) is SIGKILLed after the test.
 * `nodeArgs` go to node before the script (`--import ...`).
 */
export async function startServer(
  t: TestContext,
  args: string[],
  extraPids: number[] = [],
  nodeArgs: string[] = [],
) {
  const argv = [...nodeArgs, 'bin/plantstore', 'serve', '--port', '0', ...args];
  const child = spawn(process.execPath, argv, {
    cwd: ROOT,
    env: cleanEnv(),
  });
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  let running = true;
  void exited.then(() => {
    running = false;
  });
  t.after(async () => {
    if (running) {
      child.kill('SIGKILL');
      await exited;
    }
    for (const pid of extraPids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const logs: LogLine[] = [];
  const waiters: { match: (line: LogLine) => boolean; resolve: (line: LogLine) => void }[] = [];
  createInterface({ input: child.stdout }).on('line', (text) => {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      line = { msg: `(not JSON) ${text}` };
    }
    logs.push(line);
    for (const waiter of waiters.filter((w) => w.match(line))) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(line);
    }
  });
  const waitForLog = (match: (line: LogLine) => boolean, what = 'the line awaited', ms = 10_000) =>
    Promise.race([
      new Promise<LogLine>((resolve) => {
        const found = logs.find(match);
        if (found !== undefined) resolve(found);
        else waiters.push({ match, resolve });
      }),
      exited.then(
        ({ code, signal }) =>
          // A line logged just before the exit is still accepted.
          logs.find(match) ??
          assert.fail(`serve exited (${code ?? signal}) before ${what}: ${stderr}`),
      ),
      sleep(ms).then(() => assert.fail(`serve did not log ${what} within ${ms} ms: ${stderr}`)),
    ]);
  const listening = await waitForLog(
    (line) => LISTENING.test(line.msg ?? ''),
    '"Server listening at"',
  );
  const url = LISTENING.exec(listening.msg!)![1]!;
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const server: Server = { child, url, logs, exited, waitForLog };
  return server;
}

/**
 * Resolves once `server` refuses new connections: it has stopped listening, as it does
 * first when it shuts down. (Polled: nothing outside the process says so sooner.)
 */
export async function stoppedListening(server: Server, ms = 10_000): Promise<void> {
  const { hostname, port } = new URL(server.url);
  const deadline = Date.now() + ms;
  for (;;) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(Number(port), hostname);
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', () => resolve(true));
    });
    if (refused) return;
    assert.ok(Date.now() < deadline, `${server.url} still accepts connections after ${ms} ms`);
    await sleep(20);
  }
}

/** Runs the CLI to completion; rejects on a non-zero exit. */
export function cli(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['bin/plantstore', ...args],
      { cwd: ROOT, env: cleanEnv() },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`plantstore ${args.join(' ')}: ${error.message}\n${stderr}`));
        else resolve({ stdout, stderr });
      },
    );
  });
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliRunOptions {
  /** The directory it runs in: the repository unless given (a relative --db is under it). */
  cwd?: string;
  /** Variables set on top of the clean environment (`cleanEnv`). */
  env?: Record<string, string>;
  /** What it reads on stdin, then end of file; nothing when not given. */
  stdin?: string;
}

/**
 * Runs the built CLI, `plantstore <args>`, to its end, whatever its exit code; fails the
 * test if it has not ended by itself within 20 s (a spinning process is a bug too).
 */
export async function runCli(
  args: string[],
  { cwd = ROOT, env = {}, stdin }: CliRunOptions = {},
): Promise<CliRun> {
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'plantstore'), ...args], {
    cwd,
    env: { ...cleanEnv(), ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.stdin.end(stdin ?? '');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  assert.equal(signal, null, `plantstore ${args.join(' ')} did not end by itself: ${stderr}`);
  return { code, stdout, stderr };
}
