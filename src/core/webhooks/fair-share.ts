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
 *
 * And an endpoint whose attempts fail waits before its next one (pauseAfter): a receiver
 * that refuses every connection fails its attempts as fast as the process can record them,
 * and without a pause its 64 pending messages would each be tried at once, and all again at
 * each step of their retry schedule, the process busy with nothing else meanwhile.
 */

/** The pause after an endpoint's first failed attempt in a row. */
export const FIRST_PAUSE_MS = 250;
/** The longest pause: a receiver that is back is noticed within this (one attempt). */
export const LONGEST_PAUSE_MS = 60_000;

/**
 * How long an endpoint waits before its next attempt after `failures` failed attempts in a
 * row (each begun after the one before failed): 250 ms, doubling up to a minute, less up to
 * half of it by `random` (in [0, 1)), so that endpoints that failed together do not all try
 * again together; none before a failure. A receiver down for good thus gets about one
 * attempt a minute per process, not its pending messages at once.
 */
export function pauseAfter(failures: number, random: number): number {
  if (failures <= 0) return 0;
  const pause = Math.min(LONGEST_PAUSE_MS, FIRST_PAUSE_MS * 2 ** Math.min(failures - 1, 30));
  return Math.round(pause * (1 - random / 2));
}

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
