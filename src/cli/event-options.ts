import { Option } from 'commander';
import { EVENT_LIMITS } from '../core/change-events.js';
import { parseDuration } from '../core/tokens.js';
import { argument, positiveInteger } from './options.js';

const MINUTE_MS = 60_000;

/** `--events-retention`: how long the changes feed serves events; at least a minute. */
export const eventsRetentionOption = () =>
  new Option(
    '--events-retention <duration>',
    'how long the changes feed (GET /events) serves an event (at least 1m); a cursor older is 410',
  )
    .env('PLANTSTORE_EVENTS_RETENTION')
    .default(EVENT_LIMITS.retentionMs, '7d')
    .argParser(
      argument((text) => {
        const ms = parseDuration(text);
        if (ms < MINUTE_MS) throw new Error(`"${text}" is shorter than the least retention, 1m`);
        return ms;
      }),
    );

/** `--max-event-streams`: event streams and long polls a process serves at once. */
export const maxEventStreamsOption = () =>
  new Option(
    '--max-event-streams <n>',
    'event streams and long polls of GET /events open at once per process, then 503 (default: a quarter of --max-connections)',
  )
    .env('PLANTSTORE_MAX_EVENT_STREAMS')
    .argParser(positiveInteger('streams', 1_000_000));

/** The default of --max-event-streams: a quarter of the connections, so others find room. */
export const defaultMaxEventStreams = (maxConnections: number): number =>
  Math.max(1, Math.floor(maxConnections / 4));
