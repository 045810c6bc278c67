import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { PLANTSTORE_BIN, ROOT } from './seed.js';

const children = new Set<ChildProcess>();

/** Kills every server started here; safe to call more than once. */
export function killAll(): void {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  children.clear();
}

export const hasTaskset = ((): boolean => {
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** Pins this process (the load generator) to `core`; false when taskset is unavailable. */
export function pinSelf(core: number): boolean {
  if (!hasTaskset) return false;
  execFileSync('taskset', ['-cp', String(core), String(process.pid)], { stdio: 'ignore' });
  return true;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

export interface Server {
  name: string;
  url: string;
  child: ChildProcess;
  /** Milliseconds from spawn to the first `/healthz` 200. */
  readyMs: number;
}

async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/healthz`);
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

/** `cores` is a taskset CPU list: `0`, or `0,1`. */
async function start(name: string, argv: string[], port: number, cores: string): Promise<Server> {
  const [cmd, args] = hasTaskset
    ? ['taskset', ['-c', cores, process.execPath, ...argv]]
    : [process.execPath, argv];
  const started = performance.now();
  const child = spawn(cmd as string, args as string[], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.add(child);
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode}`);
    if (await healthy(url)) return { name, url, child, readyMs: performance.now() - started };
    if (performance.now() - started > 30_000) throw new Error(`${name} not ready within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A per-token limit no benchmark run reaches: 10^9 requests a minute. */
export const BENCH_RATE_LIMIT = '1000000000/60s';

export interface PlantstoreOptions {
  /** SQLite file; or `databaseUrl` for PostgreSQL. */
  db?: string;
  databaseUrl?: string;
  durability: 'power' | 'process';
  logLevel: string;
  cores: string;
  workers?: number;
}

export async function startPlantstore(name: string, o: PlantstoreOptions): Promise<Server> {
  const port = await freePort();
  const argv = [PLANTSTORE_BIN, 'serve', '--port', String(port)];
  if (o.databaseUrl !== undefined) argv.push('--database-url', o.databaseUrl);
  else argv.push('--db', o.db ?? '');
  argv.push('--durability', o.durability, '--log-level', o.logLevel);
  // The rate limiter runs, so its cost is measured, but one token at full load never
  // reaches this (the default, 100000 a minute, it would).
  argv.push('--rate-limit', BENCH_RATE_LIMIT);
  if (o.workers !== undefined) argv.push('--workers', String(o.workers));
  return start(name, argv, port, o.cores);
}

export async function startReference(name: string, db: string, cores: string): Promise<Server> {
  const port = await freePort();
  const argv = ['--import', 'tsx', `${ROOT}bench/reference-server.ts`, '--db', db];
  return start(name, [...argv, '--port', String(port)], port, cores);
}

/** Peak resident set size (VmHWM) of a live process, in MB; undefined where /proc lacks it. */
export function peakRssMb(server: Server): number | undefined {
  try {
    const status = readFileSync(`/proc/${server.child.pid}/status`, 'utf8');
    const kb = /^VmHWM:\s+(\d+) kB/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) / 1024;
  } catch {
    return undefined;
  }
}

/** Stops a server (SIGTERM) and waits for it to exit. */
export async function stop(server: Server): Promise<void> {
  const { child } = server;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  children.delete(child);
}
