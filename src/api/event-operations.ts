import { EVENT_LIMITS } from '../core/change-events.js';
import { EventList, EventQuery, EventStream } from './event-schemas.js';
import type { OperationSpec } from './operation.js';

const days = (ms: number) => ms / 86_400_000;

export const listEvents = {
  operationId: 'listEvents',
  method: 'GET',
  path: '/events',
  summary: 'Follow every plant change',
  description:
    'The changes feed: every plant write (create, update, delete) as an event, in one order ' +
    'that every reader sees the same way, so that a reader that has seen position `p` never ' +
    'later finds a new event below it. Two forms of the same log:\n\n' +
    '- JSON pages (the default): `?after=<position>&limit=`, oldest first (`after=now`: the ' +
    'changes to come only). `Link: <...>; ' +
    'rel="next"` is always there and carries the cursor to go on from, also on an empty page: ' +
    'follow it to get what comes next. With `?wait=30s`, a page that would be empty waits up ' +
    'to that long for the next event (a long poll).\n' +
    '- `Accept: text/event-stream`: Server-Sent Events, one per change, `id:` the position, ' +
    '`event:` the type, `data:` the plant, after a first `id:` without an event, the ' +
    'position it starts after; a heartbeat comment every ' +
    `${EVENT_LIMITS.heartbeatMs / 1000} s. Resume with \`Last-Event-ID\` (or \`?after=\`). The ` +
    'stream ends when the server shuts down: resume on any instance. A stream whose client ' +
    'stops reading is cut off after the send timeout.\n\n' +
    `Events are kept for \`--events-retention\` (${days(EVENT_LIMITS.retentionMs)} days by ` +
    'default): a cursor below the oldest kept is `410` (41001), as is one past the newest ' +
    'event (a position of another store, or of this one before a restore from a backup), ' +
    'and the client must start ' +
    'over: take the position of `after=now`, read `GET /plants` again, and follow the ' +
    'events after that position. Each ' +
    'process serves `--max-event-streams` streams and long polls at once ' +
    `(by default a quarter of \`--max-connections\`: ${EVENT_LIMITS.maxStreams} with its ` +
    'default); past it, `503` (50302) with `Retry-After`. Those slots are shared among ' +
    'tokens: past it, a token with at least two fewer than the token with the most takes ' +
    "that token's oldest (it ends; its client resumes), so each token gets an equal share.",
  tag: 'events',
  scope: 'events:read',
  query: EventQuery,
  requestHeaders: [
    {
      name: 'Accept',
      description: '`text/event-stream` for the stream; anything else gets JSON pages.',
    },
    {
      name: 'Last-Event-ID',
      description:
        'The stream resumes after this position (the `id:` of the last event received), ' +
        'instead of `after`.',
    },
  ],
  responses: {
    200: {
      description: 'A page of events (possibly empty), or the stream.',
      schema: EventList,
      alternatives: { 'text/event-stream': EventStream },
      headers: ['Link'],
    },
  },
  errors: ['malformedLastEventId', 'eventsGone', 'tooManyEventStreams'],
} satisfies OperationSpec<undefined, typeof EventQuery, undefined>;

export const eventOperations: readonly OperationSpec[] = [listEvents];
