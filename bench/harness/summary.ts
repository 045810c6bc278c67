/**
 * From turns to rows: each side's medians over its turns, and the ratios of the pairs a
 * round makes (subject ÷ yardstick in the same round, the median of those quoted). Pure.
 */
import type { TurnMeasure } from './turn.js';

export const median = (values: number[]): number => {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 === 1 ? finite[mid]! : (finite[mid - 1]! + finite[mid]!) / 2;
};

/** One turn's figures, derived from its readings. */
export interface TurnFigures {
  rps: number;
  /** Server CPU (user + system) per answered request, in microseconds. */
  cpuUs: number;
  /** The server's PostgreSQL backends' CPU per request, in microseconds. */
  dbCpuUs?: number;
  p50ms: number;
  p99ms: number;
  errors: number;
  /** Server CPU over the loaded time: 1.0 is one core busy all along. */
  serverShare: number;
  /** wrk's CPU over the loaded time. */
  wrkShare: number;
  /** Cores' worth of CPU used by the run's other servers, idle meanwhile. */
  idleCores: number;
  /** Cores' worth of CPU used by other processes during the turn. */
  otherCores?: number;
  /** The same, by the name of the process that used it (those of 10 ms or more a turn). */
  otherCoresByName?: Record<string, number>;
  stealCores?: number;
}

export function figures(t: TurnMeasure): TurnFigures {
  const w = t.wrk;
  const out: TurnFigures = {
    rps: w.requests / w.seconds,
    cpuUs: (t.serverCpu / w.requests) * 1e6,
    p50ms: w.p50us / 1000,
    p99ms: w.p99us / 1000,
    errors: w.connect + w.read + w.write + w.status + w.timeout,
    serverShare: t.serverCpu / w.seconds,
    wrkShare: w.cpuSeconds / w.seconds,
    idleCores: t.idleCpu / t.wall,
  };
  if (t.dbCpu !== undefined) out.dbCpuUs = (t.dbCpu / w.requests) * 1e6;
  if (t.otherCpu !== undefined) out.otherCores = t.otherCpu / t.wall;
  if (t.othersByName !== undefined) {
    out.otherCoresByName = Object.fromEntries(
      Object.entries(t.othersByName).map(([name, seconds]) => [name, seconds / t.wall]),
    );
  }
  if (t.steal !== undefined) out.stealCores = t.steal / t.wall;
  return out;
}

/** A side of a row: the medians of its turns' figures; errors are summed. */
export interface Side extends Omit<TurnFigures, 'errors' | 'otherCoresByName'> {
  name: string;
  /** The processes that made most of the other load, in cores over the side's turns. */
  othersText?: string;
  turns: number;
  errors: number;
  /** wrk's error counts over the turns, by kind, for the reasons. */
  errorText: string;
}

const pick = (all: TurnFigures[], key: keyof TurnFigures): number | undefined => {
  const values = all.map((f) => f[key]).filter((v): v is number => v !== undefined);
  return values.length === 0 ? undefined : median(values);
};

export function side(name: string, turns: TurnMeasure[]): Side {
  const all = turns.map(figures);
  const errors = all.reduce((sum, f) => sum + f.errors, 0);
  const kinds = (['connect', 'read', 'write', 'status', 'timeout'] as const)
    .map((k) => [k, turns.reduce((sum, t) => sum + t.wrk[k], 0)] as const)
    .filter(([, n]) => n > 0);
  const out: Side = {
    name,
    turns: turns.length,
    rps: median(all.map((f) => f.rps)),
    cpuUs: median(all.map((f) => f.cpuUs)),
    p50ms: median(all.map((f) => f.p50ms)),
    p99ms: median(all.map((f) => f.p99ms)),
    serverShare: median(all.map((f) => f.serverShare)),
    wrkShare: median(all.map((f) => f.wrkShare)),
    idleCores: median(all.map((f) => f.idleCores)),
    errors,
    errorText: kinds.map(([k, n]) => `${n} ${k === 'status' ? 'status ≥ 400' : k}`).join(', '),
  };
  for (const key of ['dbCpuUs', 'otherCores', 'stealCores'] as const) {
    const value = pick(all, key);
    if (value !== undefined) out[key] = value;
  }
  const others = topOthers(all);
  if (others !== undefined) out.othersText = others;
  return out;
}

/** The three processes that used most of the other load, its mean over the turns, in cores. */
function topOthers(all: TurnFigures[]): string | undefined {
  const measured = all.filter((f) => f.otherCoresByName !== undefined);
  if (measured.length === 0) return undefined;
  const sums = new Map<string, number>();
  for (const f of measured) {
    for (const [name, cores] of Object.entries(f.otherCoresByName!)) {
      sums.set(name, (sums.get(name) ?? 0) + cores);
    }
  }
  const top = [...sums]
    .map(([name, sum]) => [name, sum / measured.length] as const)
    .filter(([, cores]) => cores >= 0.005)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3);
  return top.length === 0 ? undefined : top.map(([n, c]) => `${n} ${c.toFixed(2)}`).join(', ');
}

/** Per-round ratios of a subject to a yardstick, whose turns are listed round by round. */
export interface Ratios {
  /** Requests per second, subject ÷ yardstick: higher is better for the subject. */
  rps: number;
  /** CPU per request, yardstick ÷ subject: the same direction as rps (higher is better). */
  cpu: number;
  /** p99 latency, subject ÷ yardstick: lower is better. */
  p99: number;
  /**
   * The lowest and highest round's rps and cpu ratios: how far one round strays from the
   * median, so that a target met by less than that reads as what it is.
   */
  spread: { rps: [number, number]; cpu: [number, number] };
}

export function pairedRatios(subject: TurnMeasure[], yardstick: TurnMeasure[]): Ratios {
  const rounds = Math.min(subject.length, yardstick.length);
  const rps: number[] = [];
  const cpu: number[] = [];
  const p99: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const s = figures(subject[i]!);
    const y = figures(yardstick[i]!);
    rps.push(s.rps / y.rps);
    cpu.push(y.cpuUs / s.cpuUs);
    p99.push(s.p99ms / y.p99ms);
  }
  const range = (values: number[]): [number, number] =>
    values.length === 0 ? [NaN, NaN] : [Math.min(...values), Math.max(...values)];
  return {
    rps: median(rps),
    cpu: median(cpu),
    p99: median(p99),
    spread: { rps: range(rps), cpu: range(cpu) },
  };
}

/**
 * The order of round `round` (counted from 0): `items` as given, then reversed, and so on
 * (A B C, C B A, A B C, ...), so that no item always comes first, or just after another.
 */
export function alternating<T>(items: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...items] : [...items].reverse();
}
