/**
 * Starting and stopping the servers under test, each pinned to the servers' core when
 * taskset is there: plantstore (the built CLI, every feature on, default settings) and the
 * yardsticks of bench/yardsticks/.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const PLANTSTORE_BIN = `${ROOT}bin/plantstore`;

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

/** Pins this process (the harness, beside wrk) to `core`; false when taskset is unavailable. */
export function pinSelf(core: number): boolean {
  if (!hasTaskset) return false;
  execFileSync('taskset', ['-cp', String(core), String(process.pid)], { stdio: 'ignore' });
  return true;
}

export async function freePort(): Promise<number> {
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

/** One start of a server: its start-to-ready time, and the other load meanwhile. */
export interface Start {
  readyMs: number;
  /** Cores' worth of CPU that neither the server nor this harness used while it started. */
  otherCores?: number;
}

export interface Server {
  name: string;
  url: string;
  pid: number;
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
  // stdout (plantstore's request log, the yardsticks' URL) goes to /dev/null; stderr is shown.
  const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  children.add(child);
  const url = `http://127.0.0.1:${port}`;
  await untilHealthy(name, child, url, 30_000);
  return { name, url, pid: child.pid!, child, readyMs: performance.now() - started };
}

/** Waits for `/healthz` at `url` to answer 200; fails if `child` exits first, or after `ms`. */
export async function untilHealthy(
  name: string,
  child: ChildProcess,
  url: string,
  ms: number,
): Promise<void> {
  const started = performance.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode}`);
    if (await healthy(url)) return;
    if (performance.now() - started > ms) throw new Error(`${name} not ready within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** What runs where: plantstore with its settings, or one of bench/yardsticks/. */
export type ServerSpec =
  | {
      kind: 'plantstore';
      /** SQLite file; or `databaseUrl` for PostgreSQL. */
      db?: string;
      databaseUrl?: string;
      durability: 'power' | 'process';
      logLevel: string;
      workers?: number;
      /** Serve /metrics on a port of its own (any free one). */
      metrics?: boolean;
      /** More `serve` options, after the others. */
      extraArgs?: readonly string[];
    }
  | { kind: 'bare-sqlite' | 'fastify-sqlite' | 'fastify-plugins'; db: string }
  | { kind: 'bare-postgres'; databaseUrl: string };

/** The arguments of `node` that start `spec` on `port`. */
export function argvOf(spec: ServerSpec, port: number): string[] {
  if (spec.kind !== 'plantstore') {
    const where =
      spec.kind === 'bare-postgres' ? ['--database-url', spec.databaseUrl] : ['--db', spec.db];
    const script = `${ROOT}bench/yardsticks/${spec.kind}.ts`;
    return ['--import', 'tsx', script, ...where, '--port', String(port)];
  }
  const argv = [PLANTSTORE_BIN, 'serve', '--port', String(port)];
  if (spec.databaseUrl !== undefined) argv.push('--database-url', spec.databaseUrl);
  else argv.push('--db', spec.db ?? '');
  // Every other setting is plantstore's default, the rate limits included: the load spreads
  // over enough tokens that no token reaches its limit (see bench/README.md).
  argv.push('--durability', spec.durability, '--log-level', spec.logLevel);
  if (spec.workers !== undefined) argv.push('--workers', String(spec.workers));
  if (spec.metrics === true) argv.push('--metrics-port', '0');
  argv.push(...(spec.extraArgs ?? []));
  return argv;
}

export async function startServer(name: string, spec: ServerSpec, cores: string): Promise<Server> {
  const port = await freePort();
  return start(name, argvOf(spec, port), port, cores);
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
