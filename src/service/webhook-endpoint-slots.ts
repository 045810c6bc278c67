import { fairLevel, FIRST_WINDOW, heldAtMost, nextWindow } from '../core/webhooks/fair-share.js';
import type { ClaimedMessage, ClaimShares } from '../store/store.js';

/** What a dispatcher knows of one endpoint. */
export interface EndpointSlots {
  inFlight: number;
  /** Claimed, not started yet. */
  waiting: ClaimedMessage[];
  /** How many attempts it may have in flight before the fair share cuts it down. */
  window: number;
  /** The last claim may have left due messages of it behind (it took all it might). */
  more: boolean;
  /** When it last held a message (epoch ms): idle endpoints are forgotten. */
  busyAt: number;
}

const heldBy = (endpoint: EndpointSlots) => endpoint.inFlight + endpoint.waiting.length;

/**
 * The endpoints a dispatcher holds messages of, with their windows, and the shares of
 * the process's `maxInFlight` slots that follow (core/webhooks/fair-share.ts): what each may
 * have in flight, and what the next claim may take of each.
 */
export class EndpointTable {
  private readonly endpoints = new Map<bigint, EndpointSlots>();

  constructor(
    private readonly maxInFlight: number,
    private readonly perEndpoint: number,
  ) {}

  values(): IterableIterator<EndpointSlots> {
    return this.endpoints.values();
  }

  /** The most attempts each endpoint may have in flight now: its window, or its fair share. */
  limits(): (endpoint: EndpointSlots) => number {
    const busy = [...this.endpoints.values()].filter((e) => heldBy(e) > 0);
    const level = fairLevel(
      busy.map((e) => e.window),
      this.maxInFlight,
    );
    return (endpoint) => Math.min(endpoint.window, level);
  }

  /** What the next claim may take of each endpoint: what it may hold, less what it holds. */
  shares(): ClaimShares {
    const limit = this.limits();
    const endpoints = new Map<bigint, number>();
    for (const [id, endpoint] of this.endpoints) {
      endpoints.set(id, Math.max(0, heldAtMost(limit(endpoint)) - heldBy(endpoint)));
    }
    return { perEndpoint: heldAtMost(FIRST_WINDOW), endpoints };
  }

  /** Files what a claim made with `shares` brought, each under its endpoint. */
  add(messages: ClaimedMessage[], shares: ClaimShares, at: number): void {
    const got = new Map<bigint, number>();
    for (const message of messages) {
      const id = message.endpoint.id;
      got.set(id, (got.get(id) ?? 0) + 1);
      let endpoint = this.endpoints.get(id);
      if (endpoint === undefined) {
        endpoint = { inFlight: 0, waiting: [], window: FIRST_WINDOW, more: false, busyAt: at };
        this.endpoints.set(id, endpoint);
      }
      endpoint.waiting.push(message);
      endpoint.busyAt = at;
    }
    // Those that got all they might (nothing, when they had no room) may have more due.
    for (const [id, endpoint] of this.endpoints) {
      endpoint.more = (got.get(id) ?? 0) === (shares.endpoints.get(id) ?? shares.perEndpoint);
    }
  }

  /** Notes an attempt's end: `delivered`, or undefined when it was not made after all. */
  ended(endpoint: EndpointSlots, delivered: boolean | undefined, at: number): void {
    if (delivered !== undefined) {
      const pressed = endpoint.more || heldBy(endpoint) >= endpoint.window;
      endpoint.window = nextWindow(endpoint.window, delivered, pressed, this.perEndpoint);
    }
    endpoint.inFlight--;
    endpoint.busyAt = at;
  }

  /** Forgets the endpoints that held nothing since `before`: they start again at 1. */
  forget(before: number): void {
    for (const [id, endpoint] of this.endpoints) {
      if (heldBy(endpoint) === 0 && endpoint.busyAt < before) this.endpoints.delete(id);
    }
  }
}
