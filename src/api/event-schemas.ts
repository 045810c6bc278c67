import { Type } from '@sinclair/typebox';
import { EVENT_LIMITS } from '../core/change-events.js';
import { Int64, Plant } from './schemas.js';
import { REFUSAL_KEYWORD } from './validation-messages.js';
import { WebhookEventName } from './webhook-schemas.js';

export const EventPosition = Int64({
  description:
    'Where the event stands in the log, from 1: every event a reader finds later has a higher ' +
    'position. Positions may skip numbers.',
});

export const ChangeEvent = Type.Object(
  {
    position: EventPosition,
    type: WebhookEventName,
    at: Type.Unsafe<Date>({
      type: 'string',
      format: 'date-time',
      description: 'When the write ran.',
    }),
    data: Plant,
  },
  {
    additionalProperties: false,
    description:
      'One plant change of the changes feed. `data` is the body of the webhook message of the ' +
      'same change: the plant as created, as updated, or as it was when deleted; ids exact.',
    examples: [
      {
        position: 42,
        type: 'plant.created',
        at: '2030-01-01T00:00:00.000Z',
        data: { id: 7, name: 'Fern', tag: 'shade' },
      },
    ],
  },
);

export const EventList = Type.Array(ChangeEvent, {
  description: 'Events in ascending position order (possibly none).',
});

export const EventStream = Type.String({
  description:
    'Server-Sent Events: per event, `id:` its position, `event:` its type and `data:` the ' +
    'plant (the `data` of the JSON form) on one line, then an empty line; a comment line ' +
    `(\`: heartbeat\`) every ${EVENT_LIMITS.heartbeatMs / 1000} s while nothing happens.`,
});

const wait = `^(?:[1-9]|[1-5][0-9]|${EVENT_LIMITS.waitMaxSeconds})s$`;

export const EventQuery = Type.Object(
  {
    after: Type.Optional(
      Type.Union(
        [
          Int64({ description: 'A position: the last event handled.' }),
          Type.Literal('now', { description: 'The newest event now: only changes to come.' }),
        ],
        {
          description:
            'Cursor: only events with a higher position (0 or more). `now`: after the newest ' +
            'event there is, so only changes from now on; the `Link` of the page, or the ' +
            'first `id:` of the stream, says which position that was. Absent: from the oldest ' +
            'event kept. Below the oldest kept, or past the newest event: `410`.',
        },
      ),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: EVENT_LIMITS.pageMax,
        default: EVENT_LIMITS.pageDefault,
        description: 'Largest number of events in a page (JSON only).',
      }),
    ),
    wait: Type.Optional(
      Type.String({
        pattern: wait,
        [REFUSAL_KEYWORD]: `wait must be whole seconds from 1s to ${EVENT_LIMITS.waitMaxSeconds}s, such as 30s.`,
        description:
          `Long poll (JSON only): \`1s\` to \`${EVENT_LIMITS.waitMaxSeconds}s\`. A page that ` +
          'would be empty waits this long for the next event instead of answering at once.',
      }),
    ),
  },
  { additionalProperties: false },
);

/** Schemas published under components/schemas, by name. */
export const eventComponents = { ChangeEvent };
