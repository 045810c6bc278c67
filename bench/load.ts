import autocannon from 'autocannon';
import type { Refiller } from './seed.js';

export type Kind = 'delete' | 'getOne' | 'list' | 'post';

export const EXPECTED_STATUS: Record<Kind, number> = {
  delete: 204,
  getOne: 200,
  list: 200,
  post: 201,
};

/** Where one server's requests go, and which ids they name. */
export interface Target {
  url: string;
  token: string;
  /** Plants 1..plants exist in this server's database at the start of every turn. */
  plants: number;
  /** For DELETE: puts back what a turn deleted, between turns. */
  refiller?: Refiller;
  /** For DELETE: the last id walked; each turn goes on from here, wrapping at `plants`. */
  cursor: number;
  /** For DELETE: puts back the previous turn's ids once more (see `turn`). */
  refillAgain?: () => void;
}

export interface TurnResult {
  rps: number;
  p50: number;
  p99: number;
  /** Responses with another status than expected, socket errors and timeouts. */
  errors: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function request(kind: Kind, target: Target, walked: { count: number }): autocannon.Request {
  const { plants } = target;
  switch (kind) {
    case 'delete':
      return {
        method: 'DELETE',
        setupRequest: (req) => {
          walked.count += 1;
          return { ...req, path: `/plants/${((target.cursor + walked.count - 1) % plants) + 1}` };
        },
      };
    case 'getOne':
      return {
        method: 'GET',
        setupRequest: (req) => ({
          ...req,
          path: `/plants/${1 + Math.floor(Math.random() * plants)}`,
        }),
      };
    case 'list':
      return { method: 'GET', path: '/plants?limit=100' };
    case 'post':
      return {
        method: 'POST',
        path: '/plants',
        headers: { 'content-type': 'application/json' },
        body: '{"name":"Bench plant"}',
      };
  }
}

async function settle(url: string): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 20));
  await (await fetch(`${url}/healthz`)).arrayBuffer();
}

/** Runs one turn of load against one server and measures it. */
export async function turn(
  kind: Kind,
  target: Target,
  connections: number,
  ms: number,
): Promise<TurnResult> {
  // A DELETE the server read before the previous turn's sockets closed may commit after
  // that turn's refill; by now (a whole turn of the other server later) it has, so put
  // those ids back once more, or a later wrap-around would meet them as 404s.
  target.refillAgain?.();
  const walked = { count: 0 };
  const latencies: number[] = [];
  const unexpected = new Map<number, number>();
  const expected = EXPECTED_STATUS[kind];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: target.url,
        connections,
        duration: ms / 1000,
        // autocannon stops at its next sample tick after `duration`: keep that short.
        sampleInt: 10,
        // A DELETE turn may walk at most half the table, so its ids stay distinct.
        ...(kind === 'delete' && { maxOverallRequests: Math.floor(target.plants / 2) }),
        headers: { authorization: `Bearer ${target.token}` },
        requests: [request(kind, target, walked)],
      },
      (error: unknown, res: autocannon.Result) => (error ? reject(error) : resolve(res)),
    );
    instance.on('response', (_client, status, _bytes, time) => {
      latencies.push(time);
      if (status !== expected) unexpected.set(status, (unexpected.get(status) ?? 0) + 1);
    });
  });
  if (kind === 'delete') {
    // Requests in flight when autocannon closed its sockets may still run on the server:
    // let them finish before putting the deleted plants back.
    await settle(target.url);
    const first = target.cursor + 1;
    const last = target.cursor + walked.count;
    const refill = () => {
      target.refiller?.refill(first, Math.min(last, target.plants));
      if (last > target.plants) target.refiller?.refill(1, last - target.plants);
    };
    refill();
    target.refillAgain = refill;
    target.cursor = last % target.plants;
  }
  const socketErrors = result.errors + result.timeouts;
  const errors = [...unexpected.values()].reduce((sum, n) => sum + n, socketErrors);
  if (errors > 0) {
    const statuses = [...unexpected].map(([status, n]) => `${n}× ${status}`).join(', ');
    process.stderr.write(`  ${target.url}: ${statuses} ${socketErrors} socket errors/timeouts\n`);
  }
  const sorted = Float64Array.from(latencies).sort();
  const seconds = (result.finish.getTime() - result.start.getTime()) / 1000;
  return {
    rps: latencies.length / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    errors,
  };
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

export interface Side {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

export interface Comparison {
  ratio: number;
  pairs: number;
  a: Side;
  b: Side;
}

const summary = (turns: TurnResult[]): Side => ({
  rps: median(turns.map((t) => t.rps)),
  p50: median(turns.map((t) => t.p50)),
  p99: median(turns.map((t) => t.p99)),
  errors: turns.reduce((sum, t) => sum + t.errors, 0),
});

/**
 * Alternates the load A B, B A, A B, ... in short turns (after one warm-up turn each), and
 * returns the median of the per-pair ratios A/B with the medians of each side.
 */
export async function compare(
  kind: Kind,
  a: Target,
  b: Target,
  connections: number,
  pairs: number,
  turnMs: number,
): Promise<Comparison> {
  await turn(kind, a, connections, turnMs);
  await turn(kind, b, connections, turnMs);
  const as: TurnResult[] = [];
  const bs: TurnResult[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < pairs; i++) {
    let ra: TurnResult;
    let rb: TurnResult;
    if (i % 2 === 0) {
      ra = await turn(kind, a, connections, turnMs);
      rb = await turn(kind, b, connections, turnMs);
    } else {
      rb = await turn(kind, b, connections, turnMs);
      ra = await turn(kind, a, connections, turnMs);
    }
    as.push(ra);
    bs.push(rb);
    ratios.push(ra.rps / rb.rps);
  }
  return { ratio: median(ratios), pairs, a: summary(as), b: summary(bs) };
}
