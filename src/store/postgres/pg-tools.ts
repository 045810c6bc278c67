// Running PostgreSQL's client tools (pg_dump, pg_restore, psql) for backup.ts: no shell, the
// password kept off their command lines, their failures as BackupErrors in the user's words.

import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { BackupError, BackupInterrupted } from '../backup.js';

/** How a tool connects: the URL for its command line, and its environment. */
export interface ToolConnection {
  url: string;
  env: NodeJS.ProcessEnv;
}

/**
 * The URL for a tool's command line, and its environment: the password goes in PGPASSWORD,
 * not in the arguments, which every user of the machine can read (ps); from the user part of
 * the URL or its `password` parameter, both of which libpq and pg accept.
 */
export function toolConnection(url: string): ToolConnection {
  try {
    return withoutPassword(new URL(url));
  } catch {
    // Not a URL, or one with a malformed %-escape.
    throw new BackupError(
      "PostgreSQL's tools need the database URL as postgres://user:password@host:port/database",
    );
  }
}

function withoutPassword(parsed: URL): ToolConnection {
  // The parameters as written: searchParams would write them anew, a space as `+`, which
  // libpq does not read as one (`options=-c search_path=...`).
  const pairs = parsed.search
    .slice(1)
    .split('&')
    .filter((pair) => pair !== '');
  const isPassword = (pair: string) => decodeURIComponent(pair.split('=')[0]!) === 'password';
  const given = pairs.find(isPassword);
  const password =
    parsed.password !== ''
      ? decodeURIComponent(parsed.password)
      : given === undefined
        ? null
        : decodeURIComponent(given.slice(given.indexOf('=') + 1));
  if (password === null) return { url: parsed.toString(), env: process.env };
  parsed.password = '';
  parsed.search = pairs.filter((pair) => !isPassword(pair)).join('&');
  return { url: parsed.toString(), env: { ...process.env, PGPASSWORD: password } };
}

export function toolMissing(command: string, error: NodeJS.ErrnoException): BackupError {
  return new BackupError(
    error.code === 'ENOENT'
      ? `${command} was not found: install PostgreSQL's client tools (Debian: postgresql-client)`
      : `${command} could not start: ${error.message}`,
  );
}

export function toolFailed(command: string, code: number | null, stderr: string): BackupError {
  // PostgreSQL's hints suggest what plantstore must not do (DROP ... CASCADE): left out.
  const said = stderr
    .trim()
    .split('\n')
    .filter((line) => !line.startsWith('HINT:'))
    .slice(-3)
    .join(' ');
  const how = code === null ? 'ended by a signal' : `failed (exit ${code})`;
  return new BackupError(`${command} ${how}${said === '' ? '' : `: ${said}`}`);
}

/** Whether a tool ended by `signal` was stopped (Ctrl-C, a stop, a hang-up), not failed. */
const stoppedBy = (signal: NodeJS.Signals | null) =>
  signal === 'SIGINT' || signal === 'SIGTERM' || signal === 'SIGHUP';

/**
 * Starts `command`, stopped when `stop` aborts, and how it ends: resolved when it exits 0;
 * else rejected with BackupInterrupted when it was stopped (the abort, or a Ctrl-C that reached
 * the tool as well as this process, maybe first), or with its standard error.
 */
function started(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  stop?: AbortSignal,
  what: 'backup' | 'restore' = 'backup',
) {
  if (stop?.aborted) throw new BackupInterrupted(what);
  // In this process's group, so that whatever stops the whole job (a closed terminal, a
  // killed group) stops the tool too, rather than leave it writing a copy no one removes.
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const kill = () => child.kill();
  stop?.addEventListener('abort', kill, { once: true });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const ended = new Promise<void>((resolve, reject) => {
    child.on('error', (error) => reject(toolMissing(command, error)));
    child.on('close', (code, by) => {
      stop?.removeEventListener('abort', kill);
      if (code === 0) resolve();
      else if (stop !== undefined && (stop.aborted || stoppedBy(by))) {
        reject(new BackupInterrupted(what));
      } else reject(toolFailed(command, code, stderr));
    });
  });
  return { child, ended };
}

/** Runs `command` to its end; answers its standard output, or throws with its standard error. */
export async function runTool(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  stop?: AbortSignal,
  what: 'backup' | 'restore' = 'backup',
): Promise<string> {
  const { child, ended } = started(command, args, env, stop, what);
  const out: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  await ended;
  return Buffer.concat(out).toString('utf8');
}

/**
 * Runs pg_dump with `args` (which write to standard output), its output written to the
 * existing file `path` through this process and synced; stopped as runTool's tools are.
 * Through this process rather than pg_dump's --file: should this process be killed outright
 * (SIGKILL, which nothing can catch), pg_dump's next write finds the pipe closed and it
 * stops, instead of dumping the whole database into a file no one removes while holding its
 * snapshot open.
 */
export async function dumpTo(
  path: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  stop?: AbortSignal,
): Promise<void> {
  const { child, ended } = started('pg_dump', args, env, stop);
  // A write that fails here (a full disk) stops pg_dump, which is waited for: the caller
  // removes the file once nothing writes it.
  const written = pipeline(child.stdout, createWriteStream(path, { flags: 'r+' })).catch(
    (error: Error) => {
      child.kill();
      return error;
    },
  );
  const [exit, failedWrite] = await Promise.allSettled([ended, written]);
  // A pg_dump that never started (no pid) says why itself; one killed for a failed write
  // would say only "ended by a signal".
  const writeError = failedWrite.status === 'fulfilled' ? failedWrite.value : undefined;
  if (writeError instanceof Error && child.pid !== undefined) {
    throw new BackupError(`the backup could not be written: ${writeError.message}`);
  }
  if (exit.status === 'rejected') throw exit.reason;
  // On disk before it takes the backup's name, as pg_dump's own --file would be.
  const file = await open(path, 'r+');
  try {
    await file.sync();
  } finally {
    await file.close();
  }
}

/**
 * Runs `prologue`, the SQL pg_restore makes of the schema `schema` of `file`, then `epilogue`
 * through psql, which stops at the first error. The prologue opens a transaction and the
 * epilogue commits it; a pg_restore that fails part-way ends psql's input without the
 * epilogue, so that nothing of it stays.
 */
export function restoreThroughPsql(
  tool: ToolConnection,
  file: string,
  schema: string,
  prologue: string,
  epilogue: string,
  signal?: AbortSignal,
): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new BackupInterrupted('restore'));
    // psql in a process group of its own: a Ctrl-C at the terminal reaches this process, not
    // psql, which is stopped only before it has the COMMIT (below). Should this process die,
    // psql reads the end of its input: without the COMMIT, the transaction goes with it.
    const psql = spawn('psql', ['--no-psqlrc', '--quiet', '-v', 'ON_ERROR_STOP=1', tool.url], {
      stdio: ['pipe', 'ignore', 'pipe'],
      env: tool.env,
      detached: true,
    });
    const reader = spawn('pg_restore', [`--schema=${schema}`, '--no-owner', '--file=-', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // Stopped before it was handed the COMMIT, psql ends its session and the transaction goes
    // with it. After, it is let finish (a pipe's worth of SQL at most): killed then, psql could
    // not say whether the COMMIT had run, and the report would be a guess.
    let committing = false;
    signal?.addEventListener(
      'abort',
      () => {
        if (committing) return;
        psql.kill();
        reader.kill();
      },
      { once: true },
    );
    const errors = { psql: '', pg_restore: '' };
    psql.stderr.on('data', (chunk: Buffer) => (errors.psql += chunk.toString('utf8')));
    reader.stderr.on('data', (chunk: Buffer) => (errors.pg_restore += chunk.toString('utf8')));
    // psql stopped on an error closes its input: pg_restore's writes then fail, which its exit says.
    psql.stdin.on('error', () => undefined);
    let failure: BackupError | undefined;
    psql.on('error', (error) => (failure ??= toolMissing('psql', error)));
    reader.on('error', (error) => (failure ??= toolMissing('pg_restore', error)));
    psql.stdin.write(prologue);
    reader.stdout.pipe(psql.stdin, { end: false });
    reader.on('close', (code, ended) => {
      if (code !== 0) {
        failure ??= stoppedBy(ended)
          ? new BackupInterrupted('restore')
          : toolFailed('pg_restore', code, errors.pg_restore);
      }
      committing = failure === undefined && !signal?.aborted;
      psql.stdin.end(committing ? epilogue : '');
    });
    psql.on('close', (code) => {
      // psql stopped on an error reads no more: pg_restore, blocked on a full pipe, would
      // wait for ever, and this process with it.
      if (reader.exitCode === null) reader.kill();
      if (code !== 0 || !committing) {
        failure = signal?.aborted
          ? new BackupInterrupted('restore')
          : (failure ?? toolFailed('psql', code, errors.psql));
      }
      if (failure === undefined) resolve();
      else reject(failure);
    });
  });
}
