/**
 * One group: its contenders probed once (same answers?), then loaded in turns, a warm-up
 * turn each (more for a server's first group; not counted), then rounds in alternating
 * order: A B C, C B A, A B C, ...
 */
import { readFileSync } from 'node:fs';
import { alternating } from './summary.js';
import {
  type Contender,
  measureTurn,
  type Scenario,
  type TurnMeasure,
  type TurnOptions,
} from './turn.js';

/** What a group runs: its id (`sqlite-large/getOne/64`), its connections, its scenario. */
export interface GroupSpec {
  id: string;
  connections: number;
  scenario: Scenario;
}

export interface GroupTurns {
  /** Each contender's measured turns, round by round. */
  turns: Map<string, TurnMeasure[]>;
  /** What the probe found wrong (a status, or answers that differ between servers). */
  problems: string[];
}

interface Probed {
  status: number;
  body: string;
  link: string | null;
}

async function probeOne(c: Contender, scenario: Scenario): Promise<Probed> {
  const token = readFileSync(c.tokensFile, 'utf8').split('\n')[0]!;
  const { method, path, body } = scenario.probe;
  const res = await fetch(`${c.server.url}${path(c.plants)}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body }),
  });
  const probed = { status: res.status, body: await res.text(), link: res.headers.get('link') };
  if (method === 'DELETE') await c.keeper.refill(c.plants, c.plants);
  if (method === 'POST') await c.keeper.trim(c.plants);
  return probed;
}

/**
 * One request of the scenario to each contender: each must answer the expected status, and
 * a read must give every contender the same body and Link, or the comparison is not fair.
 */
async function probe(scenario: Scenario, contenders: Contender[]): Promise<string[]> {
  const problems: string[] = [];
  let first: { name: string; probed: Probed } | undefined;
  for (const c of contenders) {
    const probed = await probeOne(c, scenario);
    if (probed.status !== scenario.expected) {
      problems.push(`${c.name} answered ${probed.status} to the probe, not ${scenario.expected}`);
    }
    if (scenario.writes) continue;
    first ??= { name: c.name, probed };
    const same = probed.body === first.probed.body && probed.link === first.probed.link;
    if (!same) {
      const show = (p: Probed) => `${p.body.slice(0, 80)} (Link ${p.link ?? 'none'})`;
      problems.push(
        `${c.name} answers the probe with ${show(probed)}, ${first.name} with ${show(first.probed)}`,
      );
    }
  }
  return problems;
}

export interface GroupOptions extends Omit<TurnOptions, 'connections' | 'seed'> {
  rounds: number;
  log: (line: string) => void;
  /** Warm-up turns of a contender before the rounds (1 when not given). */
  warmUps?: (c: Contender) => number;
}

export async function runGroup(
  group: GroupSpec,
  contenders: Contender[],
  o: GroupOptions,
): Promise<GroupTurns> {
  const { scenario } = group;
  const names = contenders.map((c) => c.name).join(', ');
  o.log(`${group.id}: ${names}; ${o.rounds} rounds of ${o.seconds} s turns`);
  for (const c of contenders) await scenario.prepare?.(c);
  const problems = await probe(scenario, contenders);
  // The contenders of a round read the same random ids.
  const turn = (c: Contender, seed: number) =>
    measureTurn(c, scenario, { ...o, connections: group.connections, seed });
  for (const c of contenders) {
    for (let i = 0; i < (o.warmUps?.(c) ?? 1); i++) await turn(c, 0);
  }
  const turns = new Map<string, TurnMeasure[]>(contenders.map((c) => [c.name, []]));
  for (let round = 1; round <= o.rounds; round++) {
    for (const c of alternating(contenders, round - 1)) {
      turns.get(c.name)!.push(await turn(c, round));
    }
  }
  return { turns, problems };
}
