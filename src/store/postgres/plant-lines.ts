/**
 * Writes of one plant, one at a time in this process, in the order they came. Each write locks
 * its plant's row (`FOR UPDATE`) on a pooled connection; without a line, every write of a
 * plant that many requests change at once holds a connection while it waits for the lock,
 * and the pool's other clients wait behind them all (64 PATCHes of one plant held all 10
 * connections). In line, one connection waits; across instances, one each.
 */
export class PlantLines {
  private readonly tails = new Map<bigint, Promise<void>>();

  /** Runs `write` once the writes of plant `id` that came before it have ended. */
  run<T>(id: bigint, write: () => Promise<T>): Promise<T> {
    const before = this.tails.get(id);
    const result = before === undefined ? write() : before.then(write);
    // The line goes on whatever the write's outcome; it is forgotten once it is empty.
    const tail = result.then(settled, settled);
    this.tails.set(id, tail);
    void tail.then(() => {
      if (this.tails.get(id) === tail) this.tails.delete(id);
    });
    return result;
  }

  /** Plants with writes in line now (tests). */
  get size(): number {
    return this.tails.size;
  }
}

const settled = (): void => undefined;
