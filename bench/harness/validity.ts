/**
 * When a row cannot be trusted: the load generator was the busy side, the server was held
 * back, someone else used the machine, or answers were not the expected ones. Pure; the
 * report prints the thresholds (bench/README.md, "Validity").
 */
import type { Start } from './servers.js';
import type { Side } from './summary.js';

export const LIMITS = {
  /** wrk above this share of its core may not have kept the server busy. */
  wrkMax: 0.85,
  /** A CPU-bound server below this share of its core was waiting for the load generator. */
  serverMin: 0.85,
  /**
   * Other processes (the run's idle servers included) using more than this many cores'
   * worth disturbed the turn.
   */
  otherMax: 0.15,
  /** The hypervisor taking more than this many cores' worth away disturbed the turn. */
  stealMax: 0.05,
  /** The self-check (a yardstick against a second copy of itself) must be 1 within this. */
  selfCheck: 0.05,
} as const;

export interface SideExpectations {
  /**
   * Whether the server should keep its core busy: at many connections, when nothing but its
   * CPU limits it. Not for a write that waits for fsync, nor for PostgreSQL's round trips.
   */
  cpuBound: boolean;
}

const pct = (share: number): string => `${Math.round(share * 100)}%`;

/** Why one side of a row is not to be trusted; empty when it is. */
export function sideReasons(s: Side, expect: SideExpectations): string[] {
  const reasons: string[] = [];
  if (s.errors > 0) reasons.push(`${s.name}: ${s.errors} errors (${s.errorText})`);
  if (s.wrkShare > LIMITS.wrkMax) {
    reasons.push(
      `wrk used ${pct(s.wrkShare)} of its core loading ${s.name} (limit ${pct(LIMITS.wrkMax)}): the load generator, not the server, was the busy side`,
    );
  }
  if (expect.cpuBound && s.serverShare < LIMITS.serverMin) {
    reasons.push(
      `${s.name} used ${pct(s.serverShare)} of its core (at least ${pct(LIMITS.serverMin)} expected): it was held back`,
    );
  }
  const others = (s.otherCores ?? 0) + s.idleCores;
  if (others > LIMITS.otherMax) {
    reasons.push(
      `other processes used ${others.toFixed(2)} cores during ${s.name}'s turns, the run's idle servers ${s.idleCores.toFixed(2)} of them (limit ${LIMITS.otherMax})` +
        (s.othersText === undefined ? '' : `; the most: ${s.othersText}`),
    );
  }
  if (s.stealCores !== undefined && s.stealCores > LIMITS.stealMax) {
    reasons.push(
      `the hypervisor took ${s.stealCores.toFixed(2)} cores during ${s.name}'s turns (limit ${LIMITS.stealMax})`,
    );
  }
  return reasons;
}

/** Why a self-check row (one yardstick against a copy of itself) says the run is too noisy. */
export function selfCheckReasons(rps: number, cpu: number): string[] {
  const reasons: string[] = [];
  const off = (x: number) => !(Math.abs(x - 1) <= LIMITS.selfCheck);
  if (off(rps))
    reasons.push(`self-check req/s ratio ${rps.toFixed(3)} is not 1 ± ${LIMITS.selfCheck}`);
  if (off(cpu))
    reasons.push(`self-check CPU ratio ${cpu.toFixed(3)} is not 1 ± ${LIMITS.selfCheck}`);
  return reasons;
}

/** What is expected of a server's CPU, by what it is and what it serves. */
export function expectations(
  role: { kind: string; database: string; durability?: string },
  writes: boolean,
  connections: number,
): SideExpectations {
  // A power-durable plantstore syncs every commit. A SQLite yardstick commits every write
  // alone, so every few hundred writes its automatic checkpoint copies pages back and syncs
  // the database file, on the event loop; plantstore's group commit makes that rare.
  const waitsForDisk =
    writes &&
    (role.kind === 'plantstore' ? role.durability === 'power' : role.database === 'sqlite');
  const waitsForDatabase = role.database === 'postgres';
  return { cpuBound: connections >= 64 && !waitsForDisk && !waitsForDatabase };
}

/** Why the start-to-ready figure is not to be trusted: someone else used the machine meanwhile. */
export function startReasons(starts: Start[]): string[] {
  const worst = Math.max(...starts.map((s) => s.otherCores ?? 0));
  if (!(worst > LIMITS.otherMax)) return [];
  return [
    `plantstore's start to ready was measured while other processes used up to ${worst.toFixed(2)} cores (limit ${LIMITS.otherMax})`,
  ];
}
