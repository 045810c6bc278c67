/**
 * The load generator: wrk (https://github.com/wg/wrk), one thread, pinned to the load
 * generator's core, driven by load.lua beside this file. wrk costs a few microseconds of CPU a
 * request, a fraction of what a Node load generator does, so the server stays the busy side.
 */
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { hasTaskset } from './servers.js';

const SCRIPT = fileURLToPath(new URL('load.lua', import.meta.url));

/** What the harness needs of the wrk on this machine: its version line, or why there is none. */
export function findWrk(): { version: string } | { missing: string } {
  const probe = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  if (probe.error !== undefined) {
    return {
      missing:
        'wrk is not installed (or not on PATH). The benchmark needs it as its load generator: ' +
        'apt-get install wrk (Debian, Ubuntu), brew install wrk (macOS), or build it from ' +
        'https://github.com/wg/wrk.',
    };
  }
  // `wrk -v` prints its version and usage, and exits 1.
  const line = `${probe.stdout}${probe.stderr}`.split('\n')[0] ?? '';
  const version = line.replace(/ Copyright.*$/, '').trim() || 'wrk';
  return { version };
}

/**
 * Why a test that needs wrk is skipped, or false when wrk is here. Under CI=true a missing
 * wrk throws instead: CI installs it (.ci/run), so its absence there is a failure.
 */
export function wrkSkip(what: string): string | false {
  const wrk = findWrk();
  if (!('missing' in wrk)) return false;
  if (process.env.CI === 'true') throw new Error(`${wrk.missing}: CI=true, so ${what} must run`);
  const reason = `wrk is missing: ${what} is SKIPPED (apt-get install wrk)`;
  process.stderr.write(`\n*** ${reason} ***\n\n`);
  return reason;
}

/** How requests are made: see load.lua beside this file. */
export interface LoadSpec {
  /** keyed: static, with an Idempotency-Key of its own on each request. */
  mode: 'static' | 'random' | 'walk' | 'keyed';
  method: string;
  /** May hold `{id}`, replaced per request (modes random and walk). */
  path: string;
  body?: string;
}

export interface WrkRun {
  url: string;
  connections: number;
  seconds: number;
  tokensFile: string;
  load: LoadSpec;
  /** Ids are 1..plants. */
  plants: number;
  /** mode walk: the first id is start + 1. */
  start: number;
  seed: number;
  /** Pin wrk to this core with taskset, when there is taskset. */
  core?: number;
}

/** What wrk measured in one turn; latencies in microseconds, as wrk gives them. */
export interface WrkResult {
  seconds: number;
  requests: number;
  /** Requests generated, answered or not: the ids a walk used. */
  sent: number;
  p50us: number;
  p99us: number;
  meanUs: number;
  maxUs: number;
  connect: number;
  read: number;
  write: number;
  /** Answers with a status above 399. */
  status: number;
  timeout: number;
  /** CPU time of the wrk process. */
  cpuSeconds: number;
}

const FIELDS = [
  'seconds',
  'requests',
  'sent',
  'p50us',
  'p99us',
  'meanUs',
  'maxUs',
  'connect',
  'read',
  'write',
  'status',
  'timeout',
  'cpuSeconds',
] as const;

/** The result line load.lua prints, checked field by field; throws on anything else. */
export function parseWrkOutput(stdout: string): WrkResult {
  const line = /^BENCH-WRK (\{.*\})$/m.exec(stdout)?.[1];
  if (line === undefined) throw new Error(`wrk printed no result line:\n${stdout}`);
  const parsed = JSON.parse(line) as Record<string, unknown>;
  const out: Partial<Record<(typeof FIELDS)[number], number>> = {};
  for (const field of FIELDS) {
    const value = parsed[field];
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      throw new Error(`wrk result: ${field} is not a number in ${line}`);
    }
    out[field] = value;
  }
  return out as WrkResult;
}

/** wrk's command line for one turn. */
export function wrkArgs(run: WrkRun): string[] {
  const { load } = run;
  return [
    '-t1',
    `-c${run.connections}`,
    `-d${run.seconds}s`,
    '--timeout',
    '5s',
    '-s',
    SCRIPT,
    run.url,
    '--',
    load.mode,
    run.tokensFile,
    load.method,
    load.path,
    load.body ?? '',
    String(run.plants),
    String(run.start),
    String(run.seed),
  ];
}

/** Runs wrk once and returns what it measured. */
export function runWrk(run: WrkRun): Promise<WrkResult> {
  const args = wrkArgs(run);
  const [cmd, argv] =
    run.core !== undefined && hasTaskset
      ? ['taskset', ['-c', String(run.core), 'wrk', ...args]]
      : ['wrk', args];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      if (code !== 0) {
        reject(new Error(`wrk exited with ${code}: ${stderr.trim() || stdout.trim()}`));
        return;
      }
      try {
        resolve(parseWrkOutput(stdout));
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  });
}
