import type { Requests } from './client.js';
import { PlantstoreError } from './errors.js';
import { int64Shapes } from './int64-shapes.js';
import { parseBody } from './json.js';
import type { components } from './schema.js';
import { buildUrl, requestHeaders } from './transport.js';

export type ChangeEvent = components['schemas']['ChangeEvent'];
type Plant = components['schemas']['Plant'];

/** One change as `events()` yields it; `at` only in the `poll` mode (streams do not send it). */
export interface FeedEvent {
  position: bigint;
  type: ChangeEvent['type'];
  data: Plant;
  at?: string;
}

export interface EventsOptions {
  /**
   * Start after this position (the last one handled); `'now'`: with the changes made after
   * the first connection that succeeds (the position the server answers is kept from then
   * on, for every resume); from the oldest kept if absent.
   */
  after?: bigint | 'now';
  /** `stream` (Server-Sent Events, the default) or `poll` (pages, long polled). */
  mode?: 'stream' | 'poll';
  /** Ends the iteration (and the connection) when aborted. */
  signal?: AbortSignal;
  /** The first wait before connecting again after a failure, doubled each time (500 ms). */
  backoffMs?: number;
  /** The longest wait between two attempts (30 s); `Retry-After` is obeyed up to it. */
  maxBackoffMs?: number;
  /**
   * A stream that sends nothing for this long, heartbeats included, is given up and opened
   * again (45 s: three heartbeats missed).
   */
  idleTimeoutMs?: number;
}

const DATA_SHAPE = int64Shapes['GET /events']?.['200']?.items?.properties?.data;

/**
 * What a connection yields: an event, or the position it stands at without one (the start of
 * a stream, the cursor of an empty page), so that a resume after `now` goes on from there.
 */
type Step = FeedEvent | { cursor: bigint };

/**
 * Statuses that say "not now" rather than "never": the server busy or failing for a moment,
 * or a proxy in front of it timing out (a long poll held past its read timeout).
 */
const PASSING = new Set([408, 429, 500, 502, 503, 504]);

/** An error to give up on: a refusal (401, 403, 410, 400...), not a passing failure. */
function fatal(error: unknown): boolean {
  return error instanceof PlantstoreError && !PASSING.has(error.status);
}

/**
 * The changes feed, as an async iterator that never ends by itself: every plant change after
 * `after`, in position order, each once, resuming after the last one yielded whenever the
 * connection ends (a server shutting down, a network failure), with a growing wait between
 * attempts. A `410` (the position is no longer kept: read the plants again and follow from
 * there), a refused token or scope, and other refusals end it with PlantstoreError.
 *
 * @example
 * for await (const event of client.events({ after: lastSeen })) {
 *   apply(event);
 *   lastSeen = event.position;
 * }
 */
export async function* events(
  requests: Requests,
  { after, mode = 'stream', signal, ...timing }: EventsOptions = {},
): AsyncGenerator<FeedEvent, void, undefined> {
  const backoffMs = timing.backoffMs ?? 500;
  const maxBackoffMs = timing.maxBackoffMs ?? 30_000;
  const sleep = requests.options.sleep ?? abortableSleep;
  const now = requests.options.now ?? Date.now;
  let position = after;
  let failures = 0;
  const backoff = async (asked: number | undefined) => {
    const wait =
      asked !== undefined
        ? asked * 1000
        : backoffMs * 2 ** Math.min(failures, 16) * (0.5 + Math.random() / 2);
    failures += 1;
    await sleep(Math.min(wait, maxBackoffMs), signal).catch(() => undefined);
  };
  while (!signal?.aborted) {
    let yielded = false;
    const opened = now();
    try {
      const batches =
        mode === 'poll'
          ? poll(requests, position, signal)
          : stream(requests, position, signal, timing.idleTimeoutMs ?? 45_000);
      for await (const step of batches) {
        if ('cursor' in step) {
          position = step.cursor;
          continue;
        }
        // An event resets the backoff (so does a connection that lasted, below); a server
        // that opens streams and fails at once must not be asked again at the shortest wait
        // forever.
        failures = 0;
        yielded = true;
        position = step.position;
        yield step;
        if (signal?.aborted) return;
      }
    } catch (error) {
      if (signal?.aborted) return;
      if (fatal(error)) throw error;
      await backoff(error instanceof PlantstoreError ? error.retryAfter : undefined);
      continue;
    }
    // The stream ended cleanly (a server shutting down): resume at once, elsewhere, after
    // events or a connection that lasted; one that ended soon with none waits as after a
    // failure, so that a server ending streams at once is not asked again in a tight loop.
    if (signal?.aborted) return;
    if (yielded || now() - opened >= maxBackoffMs) failures = 0;
    else await backoff(undefined);
  }
}

/** One connection of the stream; ends when the server ends it. */
async function* stream(
  requests: Requests,
  after: bigint | 'now' | undefined,
  signal: AbortSignal | undefined,
  idleTimeoutMs: number,
): AsyncGenerator<Step, void, undefined> {
  const { options } = requests;
  const abort = new AbortController();
  const stop = () => abort.abort();
  signal?.addEventListener('abort', stop, { once: true });
  let idle: ReturnType<typeof setTimeout> | undefined;
  const awake = () => {
    clearTimeout(idle);
    idle = setTimeout(stop, idleTimeoutMs);
  };
  try {
    awake();
    const headers = requestHeaders(options, {
      accept: 'text/event-stream',
      ...(typeof after === 'bigint' && { 'last-event-id': after.toString() }),
    });
    const response = await (options.fetch ?? globalThis.fetch)(
      buildUrl(options.baseUrl, '/events', {}, after === 'now' ? { after } : {}),
      { headers, signal: abort.signal },
    );
    if (!response.ok) {
      let body: unknown;
      try {
        body = parseBody(await response.text());
      } catch {
        body = undefined;
      }
      throw new PlantstoreError(
        response.status,
        body,
        response.headers,
        (options.now ?? Date.now)(),
      );
    }
    if (response.body === null) return;
    const decoder = new TextDecoder();
    let buffer = '';
    let fields: { id?: string; event?: string; data?: string } = {};
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      awake();
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, end).replace(/\r$/, '');
        buffer = buffer.slice(end + 1);
        if (line === '') {
          let step: Step | undefined;
          if (fields.data !== undefined && fields.id !== undefined) {
            step = {
              position: BigInt(fields.id),
              type: fields.event as FeedEvent['type'],
              data: parseBody(fields.data, DATA_SHAPE) as Plant,
            };
          } else if (fields.id !== undefined && /^[0-9]+$/.test(fields.id)) {
            // The position the stream starts after (the server sends it first).
            step = { cursor: BigInt(fields.id) };
          }
          if (step !== undefined) {
            // The time the caller takes over an event is not the server's silence.
            clearTimeout(idle);
            yield step;
            awake();
          }
          fields = {};
        } else if (!line.startsWith(':')) {
          const colon = line.indexOf(':');
          const name = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (name === 'data')
            fields.data = fields.data === undefined ? value : `${fields.data}\n${value}`;
          else if (name === 'id' || name === 'event') fields[name] = value;
        }
      }
    }
    // Ended without an abort of ours: a clean end. Cut by the idle timeout: try again.
    if (abort.signal.aborted && !signal?.aborted) throw new Error('the stream went quiet');
  } finally {
    clearTimeout(idle);
    signal?.removeEventListener('abort', stop);
    abort.abort();
  }
}

/** Pages, long polled: each page waits up to 30 s for the next event. */
async function* poll(
  requests: Requests,
  after: bigint | 'now' | undefined,
  signal: AbortSignal | undefined,
): AsyncGenerator<Step, void, undefined> {
  const query = { limit: 1000, wait: '30s', ...(after !== undefined && { after }) };
  for await (const page of requests.pages('/events', { query, ...(signal && { signal }) })) {
    for (const event of page.data) yield event as FeedEvent;
    if (page.next === undefined) return;
    // Where the next page starts, also after an empty one (from `now`, the head it met).
    const cursor = page.next.searchParams.get('after');
    if (cursor !== null && /^[0-9]+$/.test(cursor)) yield { cursor: BigInt(cursor) };
  }
}

const abortableSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    // The listener goes with the wait: an iterator that lives long waits many times.
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
