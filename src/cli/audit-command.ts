import { once } from 'node:events';
import { Command, Option } from 'commander';
import { stringify } from 'lossless-json';
import type { AuditEntry, AuditQuery } from '../core/audit.js';
import type { Plant } from '../core/plant.js';
import { parseDuration } from '../core/tokens.js';
import { inBatches } from '../service/maintenance.js';
import { openDatabase } from './database.js';
import {
  argument,
  databaseUrlOption,
  DAY_MS,
  type DatabaseOptions,
  dbOption,
  int64Argument,
} from './options.js';
import { forTerminal } from './terminal-text.js';

interface AuditOptions extends DatabaseOptions {
  since?: Date;
  plant?: bigint;
  json?: boolean;
}

// A date (UTC midnight) or a date-time with its zone: without one, the time would depend on
// the zone of whoever runs the command.
const ISO_TIME =
  /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/** `--since`: an ISO 8601 date or date-time, or a duration back from now (`15m`, `30d`). */
export function parseSince(text: string, now: Date = new Date()): Date {
  if (/^\d+[smhdw]$/.test(text)) return new Date(now.getTime() - parseDuration(text));
  const date = new Date(text);
  if (!ISO_TIME.test(text) || Number.isNaN(date.getTime())) {
    throw new Error(
      `"${text}" is neither a date-time such as 2026-11-21 or 2026-11-21T08:00:00Z nor a duration such as 15m or 30d`,
    );
  }
  return date;
}

const plantJson = (plant: Plant | null) => (plant === null ? '-' : stringify(plant)!);

/**
 * One entry as a line for people: fixed fields first, then the plant before and after as
 * JSON, with what a terminal would act on escaped (see forTerminal).
 */
export function formatEntry(entry: AuditEntry): string {
  const line = [
    entry.seq,
    entry.at.toISOString(),
    entry.action.padEnd(6),
    `plant=${entry.plantId}`,
    `token=${entry.tokenId ?? '-'}`,
    `request=${entry.requestId ?? '-'}`,
    `before=${plantJson(entry.before)}`,
    `after=${plantJson(entry.after)}`,
  ].join('  ');
  return forTerminal(line);
}

/** One entry as a JSON object, ids as exact integers. */
export function entryJson(entry: AuditEntry): string {
  return stringify({ ...entry, at: entry.at.toISOString() })!;
}

/** Entries read from the database at a time: the trail may be far larger than memory. */
const PAGE = 1000;

/**
 * `audit prune --before`: deletes a batch at a time, so the server goes on meanwhile. The
 * database is `audit`'s own --db or --database-url: commander hands a parent's options to the
 * parent wherever they stand, so options of the same names here would never be set.
 */
function pruneCommand(): Command {
  return new Command('prune')
    .description(
      'delete the audit entries written before a time, oldest first, and say how many ' +
        '(serve --audit-retention does the same once a minute)',
    )
    .addHelpText(
      'after',
      '\nThe database is named as for "plantstore audit": --db <file> (env: PLANTSTORE_DB) or\n' +
        '--database-url <url> (env: DATABASE_URL), before or after "prune".',
    )
    .addOption(
      new Option(
        '--before <time>',
        'delete entries written before this: 2026-01-01, 2026-01-01T00:00:00Z, or a duration ago such as 90d',
      )
        .makeOptionMandatory()
        .argParser(
          argument((text) => {
            // As for serve --audit-retention: `90m` typed for `90d` must not empty the trail
            // (and the changes feed with it). A recent time can still be given as a date.
            if (/^\d+[smhdw]$/.test(text) && parseDuration(text) < DAY_MS) {
              throw new Error(
                `"${text}" ago is less than a day ago; to delete entries that recent, give the time itself (2026-11-21T08:00:00Z)`,
              );
            }
            return parseSince(text);
          }),
        ),
    )
    .action(async ({ before }: { before: Date }, command: Command) => {
      const audit = command.parent!;
      // audit's listing options reach audit, not prune: refused, or `prune --since 90d` would
      // read as a prune of what --since names while deleting by --before alone.
      const listing = audit.opts<AuditOptions>();
      const ignored = (['since', 'plant', 'json'] as const).filter((k) => listing[k] !== undefined);
      if (ignored.length > 0) {
        command.error(
          `error: audit prune deletes by --before alone; it takes no ${ignored.map((k) => `--${k}`).join(', ')}`,
          { exitCode: 2 },
        );
      }
      const { store } = await openDatabase(audit.opts<DatabaseOptions>(), audit, {
        create: false,
      });
      try {
        const deleted = await inBatches((batch) => store.audit.prune(before, batch));
        process.stderr.write(
          `deleted ${deleted} audit entries written before ${before.toISOString()}\n`,
        );
      } finally {
        await store.close();
      }
    });
}

export function auditCommand(): Command {
  return new Command('audit')
    .description(
      'print the audit trail of plant writes (create, update, delete) of an existing ' +
        'database, oldest first: time, token id, request id, and the plant before and after',
    )
    .addOption(dbOption())
    .addOption(databaseUrlOption())
    .addOption(
      new Option(
        '--since <time>',
        'only writes at or after this time: 2026-11-21, 2026-11-21T08:00:00Z, or a duration ago such as 15m, 12h, 30d',
      ).argParser(argument((text) => parseSince(text))),
    )
    .addOption(
      new Option('--plant <id>', 'only writes of the plant with this id').argParser(
        int64Argument('the plant id'),
      ),
    )
    .option('--json', 'one JSON object per line instead of text')
    .addCommand(pruneCommand())
    .action(async (options: AuditOptions, command: Command) => {
      // `plantstore audit | head` closes the pipe early: that is the reader being done.
      process.stdout.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EPIPE') throw error;
        process.exit(0);
      });
      const { store } = await openDatabase(options, command, { create: false });
      try {
        const format = options.json ? entryJson : formatEntry;
        const query: AuditQuery = {
          limit: PAGE,
          ...(options.since && { since: options.since }),
          ...(options.plant !== undefined && { plantId: options.plant }),
        };
        for (;;) {
          const entries = await store.audit.list(query);
          if (entries.length === 0) break;
          const text = entries.map((entry) => format(entry) + '\n').join('');
          if (!process.stdout.write(text)) await once(process.stdout, 'drain');
          query.afterSeq = entries.at(-1)!.seq;
        }
      } finally {
        await store.close();
      }
    });
}
