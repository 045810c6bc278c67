/** A group's result made into its rows, each with its validity. Pure. */
import type { GroupTurns } from '../harness/group.js';
import { pairedRatios, type Ratios, side, type Side } from '../harness/summary.js';
import { expectations, selfCheckReasons, sideReasons } from '../harness/validity.js';
import { CONTENDERS, type ContenderName, type DataSet, type GroupPlan } from './plan.js';
import { SCENARIOS, type ScenarioId } from './scenarios.js';

/** A group of the plan and what its turns measured. */
export interface GroupResult extends GroupTurns {
  plan: GroupPlan;
}

export interface Row {
  group: string;
  scenario: ScenarioId;
  data: DataSet;
  plants: number;
  /** Plants more, whose ids clients chose above the server's counter (bench/data/seed.ts). */
  clientIds: number;
  connections: number;
  rounds: number;
  subject: Side;
  yardstick: Side;
  beside?: Side;
  ratios: Ratios;
  selfCheck: boolean;
  /** Why the row is invalid; empty when it is valid. */
  reasons: string[];
}

export function rowsOf(
  result: GroupResult,
  sizes: { plants: Record<DataSet, number>; clientIds: Record<DataSet, number> },
): Row[] {
  const { plan, turns } = result;
  const scenario = SCENARIOS[plan.scenario];
  const sideOf = (name: ContenderName) => {
    const s = side(name, turns.get(name) ?? []);
    const expect = expectations(CONTENDERS[name].role, scenario.writes, plan.connections);
    return { side: s, reasons: sideReasons(s, expect) };
  };
  return plan.rows.map((r) => {
    const subject = sideOf(r.subject);
    const yardstick = sideOf(r.yardstick);
    const beside = r.beside === undefined ? undefined : sideOf(r.beside);
    const ratios = pairedRatios(turns.get(r.subject) ?? [], turns.get(r.yardstick) ?? []);
    const reasons = [
      ...result.problems,
      ...subject.reasons,
      ...yardstick.reasons,
      ...(beside?.reasons ?? []),
      ...(r.selfCheck ? selfCheckReasons(ratios.rps, ratios.cpu) : []),
    ];
    const row: Row = {
      group: plan.id,
      scenario: plan.scenario,
      data: plan.data,
      plants: sizes.plants[plan.data],
      clientIds: sizes.clientIds[plan.data],
      connections: plan.connections,
      rounds: subject.side.turns,
      subject: subject.side,
      yardstick: yardstick.side,
      ratios,
      selfCheck: r.selfCheck === true,
      reasons: [...new Set(reasons)],
    };
    if (beside !== undefined) row.beside = beside.side;
    return row;
  });
}
