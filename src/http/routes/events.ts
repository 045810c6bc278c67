import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { EVENT_LIMITS, parseWait } from '../../core/change-events.js';
import { ApiError } from '../../core/errors.js';
import { parseLastEventId, wantsEventStream } from '../../api/event-stream.js';
import { listEvents } from '../../api/event-operations.js';
import { parseJson } from '../../api/json.js';
import type { EventFeed, FeedPage } from '../../service/event-feed.js';
import type { TokenService } from '../../service/token-service.js';
import { parseBearer } from '../../core/tokens.js';
import { eventStream } from './event-stream.js';
import { tokenOf } from '../hooks/auth.js';
import { leaveInFlight, retakeInFlight } from '../hooks/in-flight.js';
import { route } from './route.js';

/**
 * GET /events: JSON pages (long polled with `wait`), or the event stream for
 * `Accept: text/event-stream`. Streams and long polls end when the app closes, before it
 * waits for the requests in flight.
 */
export function eventRoutes(app: FastifyInstance, feed: EventFeed, tokens: TokenService): void {
  app.addHook('preClose', (done) => {
    // Streams waiting for an event end with the feed. Those whose client stopped reading are
    // cut off by the connection guard's shutdown send timeout (app.ts); the client resumes
    // from its last event elsewhere.
    feed.close();
    done();
  });

  route(app, listEvents, async (request, reply) => {
    const { limit = EVENT_LIMITS.pageDefault, wait } = request.query;
    const asked = request.query.after;
    if (typeof asked === 'bigint' && asked < 0n) {
      throw new ApiError('invalidQuery', 'The query parameter "after" must be 0 or more.');
    }
    if (wantsEventStream(request.headers.accept)) {
      return stream(feed, request, reply, asked, tokens);
    }
    const after = asked === 'now' ? await feed.head() : asked;
    const seconds = wait === undefined ? undefined : parseWait(wait);
    const page =
      seconds === undefined
        ? await feed.page(after, limit)
        : await longPoll(feed, after, limit, seconds * 1000, request, reply);
    const waitParam = wait === undefined ? '' : `&wait=${wait}`;
    reply.header('link', `</events?after=${page.next}&limit=${limit}${waitParam}>; rel="next"`);
    return page.events.map((event) => ({ ...event, data: parseJson(event.data) }));
  });
}

/** A page; if it is empty, the page read again once an event follows, or after `ms`. */
async function longPoll(
  feed: EventFeed,
  after: bigint | undefined,
  limit: number,
  ms: number,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FeedPage> {
  const page = await feed.page(after, limit);
  // Only a poll that waits takes a slot: one answered at once, or whose client left during
  // the read (its 'close', Node's or the connection guard's, came before the listener below),
  // would take another token's stream's for nothing.
  if (page.events.length > 0 || reply.raw.destroyed) return page;
  const stop = new AbortController();
  const abort = () => stop.abort();
  // Its slot taken by another token's stream, it answers what it has now.
  const release = feed.admit(tokenOf(request).id, abort);
  // Waiting holds a stream slot, not a place among the token's requests in flight.
  leaveInFlight(request);
  reply.raw.once('close', abort);
  try {
    if (!(await feed.waitBeyond(page.next, ms, stop.signal))) {
      // Answered at shutdown: the server waits for no idle keep-alive connection after it.
      if (feed.isClosed) reply.header('connection', 'close');
      return page;
    }
    // Reading the store again takes a place among the token's requests in flight again;
    // with none free, the poll answers its empty page, and its client asks again.
    if (!retakeInFlight(request)) return page;
    return await feed.page(page.next, limit);
  } finally {
    reply.raw.off('close', abort);
    release();
  }
}

async function stream(
  feed: EventFeed,
  request: FastifyRequest,
  reply: FastifyReply,
  after: bigint | 'now' | undefined,
  tokens: TokenService,
): Promise<FastifyReply> {
  const resumed = parseLastEventId(request.headers['last-event-id']);
  if (resumed === null) throw new ApiError('malformedLastEventId');
  const gone = new AbortController();
  reply.raw.once('close', () => gone.abort());
  // A Last-Event-ID (a reader resuming) wins over `now`, whose head is read only without one.
  const from = resumed ?? (after === 'now' ? await feed.head() : after);
  // Read before the answer starts, so that a cursor no longer kept is a 410, not a stream,
  // and before a slot is taken: a 410 takes no other token's stream's slot.
  const { start } = await feed.page(from, 1);
  // Its slot taken by another token's stream, it ends as when its client goes. One whose
  // client has gone already ends at once (eventStream), and takes none.
  const release = gone.signal.aborted
    ? () => undefined
    : feed.admit(tokenOf(request).id, () => gone.abort());
  // An open stream holds a stream slot, not a place among the token's requests in flight.
  leaveInFlight(request);
  try {
    // The token the request came with, checked again while the stream is open; a failed
    // lookup (the database unreachable) keeps the stream, as it keeps a token in the cache.
    const bearer = parseBearer(request.headers.authorization) ?? '';
    const allowed = async () => {
      try {
        return (await tokens.authenticate(bearer)) !== undefined;
      } catch (error) {
        request.log.warn({ err: error }, 'could not check the token of an event stream');
        return true;
      }
    };
    const body = eventStream(feed, start, release, request.log, gone.signal, allowed);
    return (
      reply
        .type('text/event-stream; charset=utf-8')
        .header('cache-control', 'no-store')
        .header('x-accel-buffering', 'no')
        // A stream ends at shutdown (or when the client goes): its connection ends with it, so
        // that a closing server waits for no idle keep-alive connection after its streams.
        .header('connection', 'close')
        .send(body)
    );
  } catch (error) {
    release();
    throw error;
  }
}
