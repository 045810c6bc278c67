// `plantstore events tail`: the changes feed (GET /events) on a terminal or in a pipe, through
// the client, which resumes by itself when the connection ends.
import { Command, Option } from 'commander';
import { type FeedEvent, PlantstoreError, stringifyBody } from '@plantstore/client';
import { INT64_MAX, int64OfAnySpelling } from '../core/int64.js';
import { int64Argument } from './options.js';
import {
  clientOf,
  describeFailure,
  exitQuietlyOnClosedPipe,
  type ServerOptions,
  tokenOption,
  urlOption,
  UsageError,
  write,
} from './plants-client.js';
import { forTerminal } from './terminal-text.js';

const FAILED = 1;
const USAGE = 2;

interface TailOptions extends ServerOptions {
  after?: bigint | 'now';
  json?: boolean;
}

/** One event for people: position, type, then the plant, what a terminal would act on escaped. */
const line = ({ position, type, data }: FeedEvent) =>
  `${[String(position), type, String(data.id), data.name, data.tag ?? '-']
    .map((cell) => forTerminal(cell))
    .join('  ')}\n`;

/** One event as a JSON line, ids and position exact. */
const jsonLine = ({ position, type, data }: FeedEvent) =>
  `${stringifyBody({ position, type, data })}\n`;

export function eventsCommand(): Command {
  const events = new Command('events').description(
    'the changes feed: every plant change (token scope events:read)',
  );
  events
    .command('tail')
    .description(
      'print every plant change as it happens, from the oldest kept or after --after (now: only those to come), until Ctrl-C; resumes by itself when the connection ends',
    )
    .addOption(urlOption())
    .addOption(tokenOption())
    .addOption(
      new Option(
        '--after <position>',
        'start after this position (the last one handled), or now',
      ).argParser((text) => {
        if (text === 'now') return 'now';
        const position = int64OfAnySpelling(text);
        if (position === undefined || position < 0n) {
          throw new UsageError(
            `--after takes a position from 0 to ${INT64_MAX}, or now, not "${forTerminal(text)}"`,
          );
        }
        // A position spelt otherwise (007, +7) is told how to write it.
        return int64Argument('the position')(text);
      }),
    )
    .addOption(new Option('--json', 'one JSON object per line (ids exact) instead of text'))
    .action(async (options: TailOptions) => {
      exitQuietlyOnClosedPipe();
      const stop = new AbortController();
      process.once('SIGINT', () => stop.abort());
      try {
        const client = clientOf(options);
        const feed = client.events({
          ...(options.after !== undefined && { after: options.after }),
          signal: stop.signal,
        });
        for await (const event of feed) await write((options.json ? jsonLine : line)(event));
      } catch (error) {
        if (error instanceof UsageError) {
          process.stderr.write(`plantstore: ${error.message}\n`);
          process.exitCode = USAGE;
          return;
        }
        const gone = error instanceof PlantstoreError && error.code === 41001;
        process.stderr.write(
          `plantstore: ${describeFailure(error, options.url)}${
            gone ? ' (start again without --after, after reading the plants again)' : ''
          }\n`,
        );
        process.exitCode = FAILED;
      }
    });
  return events;
}
