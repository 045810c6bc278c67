// The text of the changes feed's event stream (Server-Sent Events, WHATWG HTML §9.2) and the
// request headers that choose and resume it; no Fastify here.
import type { ChangeEvent } from '../core/change-events.js';
import { parseInt64 } from '../core/int64.js';

/**
 * Whether `Accept` asks for the event stream: `text/event-stream` listed with a q above 0
 * (what EventSource sends). Anything else, no Accept included, gets JSON pages.
 */
export function wantsEventStream(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(',').some((range) => {
    const [type = '', ...params] = range.split(';').map((part) => part.trim());
    if (type.toLowerCase() !== 'text/event-stream') return false;
    const q = params.find((param) => /^q=/i.test(param));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/**
 * The position in a `Last-Event-ID` header: a canonical decimal from 0; undefined when the
 * header is absent or empty (EventSource sends none before its first event), null when it is
 * anything else.
 */
export function parseLastEventId(header: string | string[] | undefined): bigint | undefined | null {
  if (header === undefined || header === '') return undefined;
  if (Array.isArray(header)) return null;
  const position = parseInt64(header.trim());
  return position === undefined || position < 0n ? null : position;
}

/**
 * One event as the stream sends it. `data` is JSON on one line (a newline in a name or tag
 * is escaped in it), so one `data:` line carries it whole.
 */
export const eventFrame = ({ position, type, data }: ChangeEvent): string =>
  `id: ${position}\nevent: ${type}\ndata: ${data}\n\n`;

/**
 * The first bytes of a stream, so that the answer's head goes out at once: a comment, and the
 * position it starts after as an `id:` with no data. That dispatches no event, but a reader
 * takes it as its last event id (WHATWG HTML §9.2.6): an EventSource that reconnects before
 * any event sends it as `Last-Event-ID`, so a stream asked from `now` resumes where it began.
 */
export const streamOpening = (after: bigint): string => `: plantstore events\nid: ${after}\n\n`;

/** What an idle stream sends every heartbeat: a comment, which readers ignore. */
export const HEARTBEAT = ': heartbeat\n\n';
