import type { FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's place among its token's requests in flight; null when it holds none. */
    inFlight: InFlightPlace | null;
  }
}

/**
 * Requests in flight per token, at most `limit` each. The rate limit counts requests a
 * minute, not requests at once: without this, one token's thousands of concurrent requests
 * would queue in front of every other client's in the database pool (or the SQLite group
 * commit), and theirs would wait seconds or time out.
 */
export class TokenRequests {
  private readonly counts = new Map<number, number>();

  constructor(readonly limit: number) {}

  /** A place for a request of token `id`, held until it is answered; undefined when full. */
  take(id: number): InFlightPlace | undefined {
    return this.reserve(id) ? new InFlightPlace(this, id) : undefined;
  }

  /** @internal: counts a request of token `id` in, unless it has `limit` already. */
  reserve(id: number): boolean {
    const count = this.counts.get(id) ?? 0;
    if (count >= this.limit) return false;
    this.counts.set(id, count + 1);
    return true;
  }

  /** @internal: InFlightPlace gives its place back here, once. */
  give(id: number): void {
    const count = this.counts.get(id)!;
    // Deleted at zero, so that the map holds only tokens with a request open now.
    if (count <= 1) this.counts.delete(id);
    else this.counts.set(id, count - 1);
  }
}

const WAITING = 0;
const HANDLING = 1;
const GIVEN_BACK = 2;

/**
 * One request's place. It is given back when its work is done: when its handler settles,
 * or, for a request refused before its handler ran, when its answer closes. A client that
 * hangs up does not end the work its request started (the handler runs on against the
 * database), so while the handler runs, the answer's close does not give the place back.
 */
export class InFlightPlace {
  private state = WAITING;

  constructor(
    private readonly owner: TokenRequests,
    private readonly id: number,
  ) {}

  /** The answer closed (sent, or its connection cut). */
  readonly closed = (): void => {
    if (this.state === WAITING) this.giveBack();
  };

  /** The handler starts: from now on only its end, or `giveBack`, frees the place. */
  handling(): void {
    if (this.state === WAITING) this.state = HANDLING;
  }

  /**
   * Takes the place again for a request that gave it back to wait (a long poll woken by an
   * event, about to read the store); false when the token has no place free.
   */
  retake(): boolean {
    if (this.state !== GIVEN_BACK) return true;
    if (!this.owner.reserve(this.id)) return false;
    this.state = HANDLING;
    return true;
  }

  /** The handler settled, or the request now waits on nothing of the store (a long poll). */
  readonly giveBack = (): void => {
    if (this.state === GIVEN_BACK) return;
    this.state = GIVEN_BACK;
    this.owner.give(this.id);
  };
}

/**
 * `handler`, keeping the request's in-flight place until it settles. Costs nothing more for
 * a request that holds no place.
 */
export function holdingPlace<Q extends FastifyRequest, A, R>(
  handler: (request: Q, reply: A) => Promise<R> | undefined,
): (request: Q, reply: A) => Promise<R> | undefined {
  return (request, reply) => {
    const place = request.inFlight;
    if (place === null) return handler(request, reply);
    place.handling();
    let result: Promise<R> | undefined;
    try {
      result = handler(request, reply);
    } catch (error) {
      place.giveBack();
      throw error;
    }
    if (result === undefined) place.giveBack();
    // A side chain: Fastify still gets the handler's own promise (and its rejection).
    else result.then(place.giveBack, place.giveBack);
    return result;
  };
}

/** Gives back the request's place early: it now waits for events, not for the store. */
export function leaveInFlight(request: FastifyRequest): void {
  request.inFlight?.giveBack();
}

/** Takes the request's place again (see InFlightPlace.retake); true for one that holds none. */
export function retakeInFlight(request: FastifyRequest): boolean {
  return request.inFlight?.retake() ?? true;
}
