import type { AttemptBudget } from './webhook-dispatch-options.js';

/** The readings and bounds of a DeliveryBudget. */
export interface BudgetOptions {
  /** The event loop's use since the last call, 0 to 1. */
  utilization: () => number;
  /** A monotonic clock in ms. */
  now: () => number;
  windowMs?: number;
  busy?: number;
  floor?: number;
}

export const BUDGET_DEFAULTS = { windowMs: 100, busy: 0.9, floor: 10 } as const;

/**
 * How many webhook attempts the dispatcher may begin, so that deliveries never take the
 * process from the requests it serves. An attempt costs far more of the event loop than a
 * request (a connection, a request and its answer, a signature, a record): with no bound, a
 * backlog for healthy receivers took the loop in proportion to the attempts in flight, and
 * creates on SQLite beside 10, 100 and 1,000 healthy endpoints fell to 0.39x, 0.18x and
 * 0.05x of a server with none (bench/tools/endpoint-burst.ts, bench/HISTORY.md).
 *
 * The loop's use is read every `windowMs` (performance.eventLoopUtilization: the share of
 * the time it ran rather than waited). While it stays under `busy`, attempts begin freely.
 * A window at or above it halves what the next may begin (counted from what this one
 * began), down to `floor` a window, so that deliveries keep going however busy the process
 * is; a window under it doubles the allowance back, and two in a row lift it. Deliveries
 * alone thus keep the loop just under `busy`; beside requests that fill it, they begin
 * `floor` a window. The process's own work is not told apart from the deliveries': a loop
 * that requests fill throttles the deliveries, which is the point.
 */
export class DeliveryBudget implements AttemptBudget {
  private readonly options: Required<BudgetOptions>;
  /** Attempts the current window may begin; Infinity while unthrottled. */
  private allowance = Infinity;
  private begun = 0;
  private windowStart: number;
  private calm = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: BudgetOptions) {
    this.options = { ...BUDGET_DEFAULTS, ...options };
    this.windowStart = this.options.now();
  }

  /** Takes one attempt's start if the window has room; answers whether it had. */
  take(): boolean {
    this.roll();
    if (this.begun >= this.allowance) return false;
    this.begun += 1;
    return true;
  }

  room(): boolean {
    this.roll();
    return this.begun < this.allowance;
  }

  later(retry: () => void): void {
    if (this.timer !== undefined) return;
    const wait = Math.max(0, this.windowStart + this.options.windowMs - this.options.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      retry();
    }, wait);
  }

  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private roll(): void {
    const { now, windowMs, busy, floor, utilization } = this.options;
    const at = now();
    if (at - this.windowStart < windowMs) return;
    const used = utilization();
    if (used >= busy) {
      this.calm = 0;
      this.allowance = Math.max(floor, Math.floor(Math.min(this.allowance, this.begun) / 2));
    } else if (++this.calm >= 2) {
      this.allowance = Infinity;
    } else {
      this.allowance = Math.max(floor, this.allowance * 2);
    }
    this.begun = 0;
    this.windowStart = at;
  }
}

/** The budget of a live process: its event loop, as Node measures it. */
export function eventLoopBudget(): DeliveryBudget {
  let last = performance.eventLoopUtilization();
  return new DeliveryBudget({
    utilization: () => {
      const next = performance.eventLoopUtilization();
      const used = performance.eventLoopUtilization(next, last).utilization;
      last = next;
      return used;
    },
    now: () => performance.now(),
  });
}
