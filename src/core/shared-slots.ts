/** How long a holder that took a slot from another waits before it may take the next. */
export const TAKE_AGAIN_MS = 100;

/**
 * A fixed number of slots shared among holders (the tokens of the event streams and long
 * polls a process serves) so that none can keep the others out: while slots are free anyone
 * takes one; once all are taken, a holder with at least two fewer than the holder with the
 * most takes that one's oldest, which is ended. Every holder that asks so gets an equal share
 * (max-min fair), and one alone may take them all. The ended one's client resumes (a stream
 * from its last event, a long poll with its next page) and, its holder now the one with the
 * most, is refused until another holder lets a slot go. A holder takes from others at most
 * once every TAKE_AGAIN_MS: one that let its slot go and asked again, over and over, would
 * otherwise end another's stream at each request.
 */
export class SharedSlots<Holder> {
  private readonly held = new Map<Holder, Set<Slot>>();
  /** When each holder last took a slot from another, while within TAKE_AGAIN_MS. */
  private readonly tookAt = new Map<Holder, number>();
  private taken = 0;

  /** `now`: a clock in milliseconds; `counted`, told the slots taken whenever they change. */
  constructor(
    readonly size: number,
    private readonly now: () => number,
    private readonly counted?: (taken: number) => void,
  ) {}

  /**
   * A slot for `holder`, or undefined when none may be had: let go with the function answered
   * (any number of times). `end` is called if another holder takes the slot away: it is let
   * go already then.
   */
  take(holder: Holder, end: () => void): (() => void) | undefined {
    if (this.taken >= this.size && !this.takeFromTheLargest(holder)) return undefined;
    let slots = this.held.get(holder);
    if (slots === undefined) this.held.set(holder, (slots = new Set()));
    const slot: Slot = { end };
    slots.add(slot);
    this.taken += 1;
    this.counted?.(this.taken);
    return () => this.letGo(holder, slot);
  }

  /** Slots taken now. */
  get inUse(): number {
    return this.taken;
  }

  private takeFromTheLargest(holder: Holder): boolean {
    const now = this.now();
    if (now - (this.tookAt.get(holder) ?? -Infinity) < TAKE_AGAIN_MS) return false;
    const mine = this.held.get(holder)?.size ?? 0;
    let largest: [Holder, Set<Slot>] | undefined;
    for (const entry of this.held) {
      if (largest === undefined || entry[1].size > largest[1].size) largest = entry;
    }
    if (largest === undefined || largest[1].size < mine + 2) return false;
    for (const [other, at] of this.tookAt) if (now - at >= TAKE_AGAIN_MS) this.tookAt.delete(other);
    this.tookAt.set(holder, now);
    // A Set iterates in insertion order: its first slot is its oldest.
    const oldest = largest[1].values().next().value!;
    this.letGo(largest[0], oldest);
    oldest.end();
    return true;
  }

  private letGo(holder: Holder, slot: Slot): void {
    const slots = this.held.get(holder);
    if (slots === undefined || !slots.delete(slot)) return;
    this.taken -= 1;
    this.counted?.(this.taken);
    if (slots.size === 0) this.held.delete(holder);
  }
}

interface Slot {
  readonly end: () => void;
}
