import {
  fairLevel,
  FIRST_WINDOW,
  heldAtMost,
  nextWindow,
  pauseAfter,
} from '../core/webhooks/fair-share.js';
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
  /** Its failed attempts in a row, each begun after the one before failed. */
  failures: number;
  /** When the last of those failed (epoch ms). */
  failedAt: number;
  /** No attempt of it begins before this (epoch ms): the pause after failures. */
  pausedUntil: number;
}

const heldBy = (endpoint: EndpointSlots) => endpoint.inFlight + endpoint.waiting.length;

/** Whether `endpoint` is in the pause after a failure at `now`: no attempt of it begins. */
export const pausedAt = (endpoint: EndpointSlots, now: number): boolean =>
  endpoint.pausedUntil > now;

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
    /** In [0, 1): the jitter of pauses. */
    private readonly random: () => number,
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

  /**
   * What the next claim may take of each endpoint: what it may hold, less what it holds;
   * nothing of one paused at `now`.
   */
  shares(now: number): ClaimShares {
    const limit = this.limits();
    const endpoints = new Map<bigint, number>();
    for (const [id, endpoint] of this.endpoints) {
      const room = heldAtMost(limit(endpoint)) - heldBy(endpoint);
      endpoints.set(id, pausedAt(endpoint, now) ? 0 : Math.max(0, room));
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
        endpoint = {
          inFlight: 0,
          waiting: [],
          window: FIRST_WINDOW,
          more: false,
          busyAt: at,
          failures: 0,
          failedAt: -Infinity,
          pausedUntil: -Infinity,
        };
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

  /**
   * Notes the end of an attempt begun at `begun`: `delivered`, or undefined when it was not
   * made after all. A failure pauses the endpoint (pauseAfter); attempts begun before the
   * last failure (side by side with it) fail without lengthening the pause.
   */
  ended(endpoint: EndpointSlots, delivered: boolean | undefined, at: number, begun: number): void {
    if (delivered !== undefined) {
      const pressed = endpoint.more || heldBy(endpoint) >= endpoint.window;
      endpoint.window = nextWindow(endpoint.window, delivered, pressed, this.perEndpoint);
    }
    if (delivered === true) {
      endpoint.failures = 0;
      endpoint.pausedUntil = -Infinity;
    } else if (delivered === false && begun >= endpoint.failedAt) {
      endpoint.failures++;
      endpoint.failedAt = at;
      endpoint.pausedUntil = at + pauseAfter(endpoint.failures, this.random());
    }
    endpoint.inFlight--;
    endpoint.busyAt = at;
  }

  /**
   * When the first pause ends, after `now`, of an endpoint with messages waiting or maybe
   * left in the queue: the dispatcher looks again then. Infinity if none.
   */
  nextResume(now: number): number {
    let first = Infinity;
    for (const endpoint of this.endpoints.values()) {
      const wants = endpoint.waiting.length > 0 || endpoint.more;
      if (wants && pausedAt(endpoint, now)) first = Math.min(first, endpoint.pausedUntil);
    }
    return first;
  }

  /**
   * Forgets the endpoints that held nothing, and were not paused, since `before`: they start
   * again at a window of 1 and no pause.
   */
  forget(before: number): void {
    for (const [id, endpoint] of this.endpoints) {
      const idleSince = Math.max(endpoint.busyAt, endpoint.pausedUntil);
      if (heldBy(endpoint) === 0 && idleSince < before) this.endpoints.delete(id);
    }
  }
}
