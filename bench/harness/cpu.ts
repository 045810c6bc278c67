/**
 * CPU time from /proc: of a process and its descendants (the server under load, or a
 * PostgreSQL backend), and of the whole machine. Linux only; elsewhere every reading is
 * undefined and the report says the CPU figures are missing.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat and /proc/stat (`getconf CLK_TCK`). */
export const CLK_TCK = ((): number => {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isInteger(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
})();

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    // The process (or thread) ended between listing and reading: it counts as nothing.
    return undefined;
  }
};

/**
 * utime + stime of a process in seconds, from /proc/<pid>/stat: every thread, live or ended.
 * The command name (field 2) may hold spaces and parentheses, so fields count from its end.
 */
export function statCpuSeconds(stat: string): number {
  const fields = statFields(stat);
  // Fields 14 and 15 of stat(5); fields[0] here is field 3.
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

/** The fields of a /proc/<pid>/stat line after the command name: [0] is field 3, the state. */
const statFields = (stat: string): string[] => stat.slice(stat.lastIndexOf(')') + 2).split(' ');

/**
 * CPU seconds of one process, user and system. Summed from each thread's
 * /proc/<pid>/task/<tid>/schedstat (nanoseconds on a CPU) where the kernel has it: a 1 s turn
 * is 100 clock ticks, too coarse for per-request figures compared at 5%. Falls back to
 * /proc/<pid>/stat. Undefined when the process is gone.
 */
export function processCpuSeconds(pid: number): number | undefined {
  const tasks = listDir(`/proc/${pid}/task`);
  if (tasks !== undefined && schedstatWorks) {
    let ns = 0;
    for (const tid of tasks)
      ns += Number(read(`/proc/${pid}/task/${tid}/schedstat`)?.split(' ')[0] ?? 0);
    return ns / 1e9;
  }
  const stat = read(`/proc/${pid}/stat`);
  return stat === undefined ? undefined : statCpuSeconds(stat);
}

const schedstatWorks = read('/proc/self/schedstat') !== undefined;

/** Which source processCpuSeconds uses, for the report. */
export const CPU_SOURCE = schedstatWorks
  ? 'the sum over its threads of /proc/<pid>/task/<tid>/schedstat (nanoseconds)'
  : `/proc/<pid>/stat utime + stime (clock ticks of 1/${CLK_TCK} s)`;

function listDir(dir: string): string[] | undefined {
  try {
    return readdirSync(dir);
  } catch {
    return undefined;
  }
}

/** The pid and every live descendant (a server's --workers), from /proc/<pid>/task/<tid>/children. */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    for (const tid of listDir(`/proc/${out[i]}/task`) ?? []) {
      const children = read(`/proc/${out[i]}/task/${tid}/children`)?.trim();
      if (children) out.push(...children.split(' ').map(Number));
    }
  }
  return out;
}

/** CPU seconds of a process and its live descendants; undefined when the process is gone. */
export function treeCpuSeconds(pid: number): number | undefined {
  const [root, ...rest] = processTree(pid).map(processCpuSeconds);
  if (root === undefined) return undefined;
  return rest.reduce<number>((sum, s) => sum + (s ?? 0), root);
}

/** The whole machine's CPU time, in core-seconds, from the `cpu` line of /proc/stat. */
export interface MachineCpu {
  /** user + nice + system + irq + softirq. */
  busy: number;
  /** Time the hypervisor gave this machine's CPUs to someone else. */
  steal: number;
}

export function parseProcStat(text: string): MachineCpu | undefined {
  const line = /^cpu +(.+)$/m.exec(text)?.[1];
  if (line === undefined) return undefined;
  const [user, nice, system, , , irq, softirq, steal] = line.split(/ +/).map(Number);
  const busy = [user, nice, system, irq, softirq].reduce<number>((s, n) => s + (n ?? 0), 0);
  return { busy: busy / CLK_TCK, steal: (steal ?? 0) / CLK_TCK };
}

export function machineCpu(): MachineCpu | undefined {
  const text = read('/proc/stat');
  return text === undefined ? undefined : parseProcStat(text);
}

/**
 * A field of /proc/<pid>/status given in kB (VmHWM, RssAnon, RssFile), in MB; undefined where
 * /proc lacks it.
 */
export function statusMb(pid: number, field: 'VmHWM' | 'RssAnon' | 'RssFile'): number | undefined {
  const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(
    read(`/proc/${pid}/status`) ?? '',
  )?.[1];
  return kb === undefined ? undefined : Number(kb) / 1024;
}

/** The CPU seconds of each of `pids` now. */
export function cpuOf(pids: number[] | undefined): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids ?? []) {
    const seconds = processCpuSeconds(pid);
    if (seconds !== undefined) out.set(pid, seconds);
  }
  return out;
}

/** CPU used since `before` by the processes now in `after` (from 0 for those new since). */
export function cpuSince(before: Map<number, number>, after: Map<number, number>): number {
  let sum = 0;
  for (const [pid, seconds] of after) sum += seconds - (before.get(pid) ?? 0);
  return sum;
}

/**
 * The CPU seconds of the children of a shell, from the second line `times` prints
 * (`0m1.250s 0m0.120s`: user, then system).
 */
export function childrenCpuSeconds(stderr: string): number | undefined {
  const lines = stderr.trimEnd().split('\n');
  const match = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/.exec(lines.at(-1) ?? '');
  if (match === null) return undefined;
  const [, um, us, sm, ss] = match.map(Number) as number[];
  return um! * 60 + us! + sm! * 60 + ss!;
}

/** Every process's CPU seconds (utime + stime of /proc/<pid>/stat), by pid. */
export function processTable(): Map<number, number> {
  const out = new Map<number, number>();
  for (const entry of listDir('/proc') ?? []) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = read(`/proc/${entry}/stat`);
    if (stat !== undefined) out.set(Number(entry), statCpuSeconds(stat));
  }
  return out;
}

/**
 * What a process is, for a person reading why a row is invalid: its command line, cut to
 * 40 characters (`postgres: autovacuum worker`), or for a kernel thread its name
 * (`kdamond.0`, `kswapd0`).
 */
export function processName(pid: number): string {
  const line = read(`/proc/${pid}/cmdline`)?.replaceAll('\0', ' ').trim();
  if (line) return line.slice(0, 40);
  const stat = read(`/proc/${pid}/stat`);
  return stat === undefined
    ? `pid ${pid}`
    : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
}

/**
 * The CPU seconds each process outside `mine` used between two tables, summed by name,
 * those of at least `least` seconds: who made another load that invalidates a row.
 */
export function othersByName(
  before: Map<number, number>,
  after: Map<number, number>,
  mine: ReadonlySet<number>,
  least: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [pid, seconds] of after) {
    if (mine.has(pid)) continue;
    const used = seconds - (before.get(pid) ?? 0);
    if (used < least) continue;
    const name = processName(pid);
    out[name] = (out[name] ?? 0) + used;
  }
  return out;
}

/**
 * CPU seconds of the ended children `pid` has waited for, user and system (fields 16 and 17 of
 * stat(5)): for PostgreSQL's postmaster, the backends that have ended, a short-lived client's
 * among them, whose CPU no live process's reading holds any more.
 */
export function reapedCpuSeconds(pid: number): number | undefined {
  const stat = read(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  const fields = statFields(stat);
  return (Number(fields[13]) + Number(fields[14])) / CLK_TCK;
}

/**
 * The processes above `pid` that launched it through npm or tsx: its ancestors up to the first
 * that is not node (npm, npx, tsx), nor the shell npm runs a script in.
 */
export function launchersOf(pid: number): number[] {
  const launcher = /^(\S*\/)?(node|npm|npx|tsx)( |$)|^(\S*\/)?sh -c /;
  const out: number[] = [];
  for (const parent of ancestorsOf(pid)) {
    if (!launcher.test(processName(parent))) break;
    out.push(parent);
  }
  return out;
}

/** The processes above `pid` (its parent, theirs...), init left out. */
export function ancestorsOf(pid: number): number[] {
  const out: number[] = [];
  for (let at = pid; ;) {
    const stat = read(`/proc/${at}/stat`);
    // Field 4 of stat(5), the parent's pid.
    const parent = stat === undefined ? 0 : Number(statFields(stat)[1]);
    if (!(parent > 1)) return out;
    out.push(parent);
    at = parent;
  }
}
