/**
 * How a process shares its delivery slots among webhook endpoints, so that a receiver that
 * is slow, hangs or fails holds only its own share and never delays another's messages.
 *
 * Each endpoint has a window: how many attempts it may have in flight. It starts at 1 and
 * doubles with each delivered attempt while the endpoint has as many messages as its window
 * lets go at once (one that keeps up with fewer does not grow it), up to the per-endpoint
 * bound; any attempt that fails (a timeout, no connection, an answer other than 2xx) sets
 * it back to 1. A receiver that hangs thus never has more than one attempt in flight after
 * its first failure, and one that never answered has never had more than one. Growth is
 * fast because only deliveries earn it and the fair share below bounds it: a burst to an
 * endpoint the process has not sent to for a while waits two or three of its round trips
 * more than it would at a full window.
 *
 * The process's slots are then shared max-min fairly among the endpoints with messages in
 * hand: each gets its window, cut down to an equal share of the slots when the windows
 * together would take more (an endpoint whose window is smaller leaves the rest of its share
 * to the others). And an endpoint with nothing in flight may always start one attempt,
 * however many slots others hold: so every endpoint with due messages has one going.
 */

/** The window of an endpoint the process has not sent to yet (or forgot). */
export const FIRST_WINDOW = 1;

/**
 * An endpoint's window after an attempt; `pressed`: whether the endpoint had at least as many
 * messages as its window when the attempt ended (in flight, this one included, waiting, or
 * due in the queue).
 */
export function nextWindow(
  window: number,
  delivered: boolean,
  pressed: boolean,
  perEndpoint: number,
): number {
  if (!delivered) return FIRST_WINDOW;
  return pressed ? Math.min(window * 2, perEndpoint) : window;
}

/**
 * The level that shares `slots` max-min fairly among `windows`: each endpoint may have
 * `min(window, level)` attempts in flight. Infinity when the windows fit as they are; never
 * below 1.
 */
export function fairLevel(windows: readonly number[], slots: number): number {
  const sorted = [...windows].sort((a, b) => a - b);
  let left = slots;
  for (const [i, window] of sorted.entries()) {
    const even = Math.floor(left / (sorted.length - i));
    if (window > even) return Math.max(1, even);
    left -= window;
  }
  return Infinity;
}

/**
 * How many messages a process holds for an endpoint whose limit is `limit`: those in flight
 * and as many waiting to follow them at once, except at a limit of 1 (an endpoint new or
 * failing), where a message waiting behind a hung attempt would only see its lease run out.
 */
export const heldAtMost = (limit: number): number => (limit === 1 ? 1 : 2 * limit);
