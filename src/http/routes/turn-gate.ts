/**
 * Lets at most `perTurn` callers through in a turn of the event loop; the others wait, in
 * the order they came, for the turns after, each after the turn's I/O (setImmediate). For
 * work that would otherwise run on without the loop turning: event streams catching up from
 * an old position read a batch of the log each, synchronously on SQLite, and 300 of them
 * yielding one turn between their batches still ran 300 batches a turn: every other request
 * waited up to 17 s. Through a gate, a turn runs a few batches, whatever the number of
 * streams, and the requests between them are served.
 *
 * Callers that give a `key` share work: once one with a key has passed in a turn, up to
 * `sharedPerTurn` others with a key let through go in the same turn without taking a pass.
 * Streams that follow the writes from memory read the same batch at the same position and
 * send one text made once; gated one by one, they drifted apart, and each made its own (100
 * streams following a burst of creates on SQLite cost 5 times the CPU a create they cost
 * with one turn between batches; bench/HISTORY.md).
 */
export class TurnGate<Key = never> {
  private passed = 0;
  private shared = 0;
  /** The keys of those let through this turn. */
  private readonly keys = new Set<Key>();
  private waiting: Waiter<Key>[] = [];
  private turning = false;

  constructor(
    private readonly perTurn: number,
    private readonly sharedPerTurn = 0,
  ) {}

  /**
   * Resolves when the caller may go: at once if this turn has room, or room for one more
   * with a `key` let through, else at a later turn; at once too when `signal` aborts,
   * leaving its place (and no pass taken) to those behind.
   */
  pass(signal?: AbortSignal, key?: Key): Promise<void> {
    this.turnSoon();
    if (signal?.aborted === true) return Promise.resolve();
    if (this.sharing(key)) {
      this.shared += 1;
      return Promise.resolve();
    }
    if (this.passed < this.perTurn && this.waiting.length === 0) {
      this.letThrough(key);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const waiter: Waiter<Key> = {
        go: () => {
          signal?.removeEventListener('abort', leave);
          resolve();
        },
        key,
      };
      const leave = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        resolve();
      };
      signal?.addEventListener('abort', leave, { once: true });
      this.waiting.push(waiter);
    });
  }

  /** Callers waiting for a later turn. */
  get queued(): number {
    return this.waiting.length;
  }

  private sharing(key: Key | undefined): boolean {
    return key !== undefined && this.keys.has(key) && this.shared < this.sharedPerTurn;
  }

  private letThrough(key: Key | undefined): void {
    this.passed += 1;
    if (key !== undefined) this.keys.add(key);
  }

  private turnSoon(): void {
    if (this.turning) return;
    this.turning = true;
    setImmediate(() => {
      this.turning = false;
      this.passed = 0;
      this.shared = 0;
      this.keys.clear();
      const going: Waiter<Key>[] = [];
      while (this.waiting.length > 0) {
        const { key } = this.waiting[0]!;
        if (this.sharing(key)) this.shared += 1;
        else if (this.passed < this.perTurn) this.letThrough(key);
        else break;
        going.push(this.waiting.shift()!);
      }
      // Those further back with a key let through this turn go with it, while there is room.
      if (this.keys.size > 0 && this.shared < this.sharedPerTurn) {
        this.waiting = this.waiting.filter((waiter) => {
          if (!this.sharing(waiter.key)) return true;
          this.shared += 1;
          going.push(waiter);
          return false;
        });
      }
      // One key's callers one after another (a stable sort), so that they find its batch's
      // text among those kept (event-stream.ts).
      const order = new Map([...this.keys].map((key, i) => [key, i]));
      const rank = ({ key }: Waiter<Key>) => (key === undefined ? -1 : order.get(key)!);
      for (const { go } of going.sort((a, b) => rank(a) - rank(b))) go();
      // Those let through this turn count against it: the next turn starts the count anew.
      if (this.passed > 0) this.turnSoon();
    });
  }
}

interface Waiter<Key> {
  go: () => void;
  key: Key | undefined;
}
