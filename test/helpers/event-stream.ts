import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';

/** One event of a Server-Sent Events stream, as a reader parses it. */
export interface StreamEvent {
  id: string;
  event: string;
  data: string;
}

export interface EventReader {
  response: Response;
  /** The next `n` events, waiting up to `ms` for them. */
  take(n: number, ms?: number): Promise<StreamEvent[]>;
  /** Resolves at the next comment line (a heartbeat), waiting up to `ms`. */
  heartbeat(ms?: number): Promise<void>;
  /** How the stream ended: cleanly, or cut. */
  ended: Promise<'ended' | 'cut'>;
  /** Every comment line so far. */
  comments: string[];
  /**
   * The reader's last event id once the stream has set one (an `id:` field, with an event or
   * without), waiting up to `ms` for it: where an EventSource would resume.
   */
  lastEventId(ms?: number): Promise<string>;
  /** The first `id:` the stream sent (its opening: the position it starts after). */
  firstId(ms?: number): Promise<string>;
  close(): void;
}

/**
 * Opens GET `url` as an event stream with fetch (as a page would; EventSource cannot send a
 * token) and parses it as the WHATWG HTML standard says: lines, fields, a blank line ends an
 * event. Closed after the test.
 */
export async function readEvents(
  t: TestContext,
  url: string,
  token: string,
  headers: Record<string, string> = {},
): Promise<EventReader> {
  const abort = new AbortController();
  t.after(() => abort.abort());
  const response = await fetch(url, {
    headers: { accept: 'text/event-stream', authorization: `Bearer ${token}`, ...headers },
    signal: abort.signal,
  });
  const events: StreamEvent[] = [];
  const comments: string[] = [];
  let lastId: string | undefined;
  let firstId: string | undefined;
  let wake: () => void = () => undefined;
  let finished = false;
  const ended = (async (): Promise<'ended' | 'cut'> => {
    if (response.body === null) return 'ended';
    const decoder = new TextDecoder();
    let buffer = '';
    let current: Partial<StreamEvent> & { data?: string } = {};
    try {
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          if (line === '') {
            if (current.id !== undefined) {
              firstId ??= current.id;
              lastId = current.id;
            }
            if (current.data !== undefined) {
              events.push({
                id: current.id ?? '',
                event: current.event ?? 'message',
                data: current.data,
              });
            }
            current = {};
          } else if (line.startsWith(':')) {
            comments.push(line);
          } else {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'data')
              current.data = current.data === undefined ? value : `${current.data}\n${value}`;
            else if (field === 'id' || field === 'event') current[field] = value;
          }
          wake();
        }
      }
      return 'ended';
    } catch {
      return 'cut';
    } finally {
      finished = true;
      wake();
    }
  })();
  let taken = 0;
  const until = async (ready: () => boolean, what: string, ms: number) => {
    const deadline = Date.now() + ms;
    while (!ready()) {
      assert.ok(!finished, `the stream ended before ${what}`);
      const left = deadline - Date.now();
      assert.ok(left > 0, `no ${what} within ${ms} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  };
  return {
    response,
    comments,
    ended,
    async take(n, ms = 10_000) {
      await until(() => events.length >= taken + n, `${n} more events`, ms);
      taken += n;
      return events.slice(taken - n, taken);
    },
    async heartbeat(ms = 10_000) {
      const seen = comments.filter((c) => c === ': heartbeat').length;
      await until(() => comments.filter((c) => c === ': heartbeat').length > seen, 'heartbeat', ms);
    },
    async lastEventId(ms = 10_000) {
      await until(() => lastId !== undefined, 'id', ms);
      return lastId!;
    },
    async firstId(ms = 10_000) {
      await until(() => firstId !== undefined, 'id', ms);
      return firstId!;
    },
    close: () => abort.abort(),
  };
}
