/**
 * Lets at most `perTurn` callers through in a turn of the event loop; the others wait, in
 * the order they came, for the turns after, each after the turn's I/O (setImmediate). For
 * work that would otherwise run on without the loop turning: event streams catching up from
 * an old position read a batch of the log each, synchronously on SQLite, and 300 of them
 * yielding one turn between their batches still ran 300 batches a turn: every other request
 * waited up to 17 s. Through a gate, a turn runs a few batches, whatever the number of
 * streams, and the requests between them are served.
 */
export class TurnGate {
  private passed = 0;
  private readonly waiting: (() => void)[] = [];
  private turning = false;

  constructor(private readonly perTurn: number) {}

  /**
   * Resolves when the caller may go: at once if this turn has room, else at a later turn; at
   * once too when `signal` aborts, leaving its place (and no pass taken) to those behind.
   */
  pass(signal?: AbortSignal): Promise<void> {
    this.turnSoon();
    if (signal?.aborted === true) return Promise.resolve();
    if (this.passed < this.perTurn && this.waiting.length === 0) {
      this.passed += 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const go = () => {
        signal?.removeEventListener('abort', leave);
        resolve();
      };
      const leave = () => {
        const at = this.waiting.indexOf(go);
        if (at >= 0) this.waiting.splice(at, 1);
        resolve();
      };
      signal?.addEventListener('abort', leave, { once: true });
      this.waiting.push(go);
    });
  }

  /** Callers waiting for a later turn. */
  get queued(): number {
    return this.waiting.length;
  }

  private turnSoon(): void {
    if (this.turning) return;
    this.turning = true;
    setImmediate(() => {
      this.turning = false;
      this.passed = 0;
      while (this.passed < this.perTurn && this.waiting.length > 0) {
        this.passed += 1;
        this.waiting.shift()!();
      }
      // Those let through this turn count against it: the next turn starts the count anew.
      if (this.passed > 0) this.turnSoon();
    });
  }
}
