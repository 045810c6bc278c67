import { realpathSync, statSync } from 'node:fs';
import { Command, Option } from 'commander';
import type { Plant, PlantPatch } from '@plantstore/client';
import { eachOptionOnce, positiveInteger } from './options.js';
import {
  clientOf,
  describeFailure,
  exitQuietlyOnClosedPipe,
  plantIdArgument,
  plantJson,
  plantTable,
  type ServerOptions,
  tokenOption,
  urlOption,
  UsageError,
  write,
} from './plants-client.js';
import { type ImportFailure, importFile, type ImportSummary } from './plants-import.js';
import { progress } from './progress.js';
import { forTerminal } from './terminal-text.js';

/** Exit codes as every command: 1 failed, 2 the command line was wrong. */
const FAILED = 1;
const USAGE = 2;
/** As a shell reports a command ended by Ctrl-C (128 + SIGINT). */
const INTERRUPTED = 130;
const PAGE = 1000;
/** Failures listed on stderr after an import; --json gives every one. */
const LISTED_FAILURES = 100;

interface OutputOptions extends ServerOptions {
  json?: boolean;
}

/** Runs a command's work, turning what goes wrong into a message and an exit code. */
function run<A extends unknown[]>(work: (...args: A) => Promise<void>) {
  return async (...args: A) => {
    const options = args.at(-2) as ServerOptions;
    try {
      await work(...args);
    } catch (error) {
      const usage = error instanceof UsageError;
      process.stderr.write(
        `plantstore: ${usage ? error.message : describeFailure(error, options.url)}\n`,
      );
      process.exitCode = usage ? USAGE : FAILED;
    }
  };
}

const show = (plants: Plant[], options: OutputOptions) =>
  write(options.json ? plants.map(plantJson).join('') : plantTable(plants));

/** A subcommand with the options every plants command takes. */
function subcommand(parent: Command, name: string, description: string): Command {
  return parent
    .command(name)
    .description(description)
    .addOption(urlOption())
    .addOption(tokenOption());
}

const jsonOption = () =>
  new Option('--json', 'one JSON object per line (ids exact) instead of a table');
const tagOption = (what: string) => new Option('--tag <tag>', what);

function listCommand(plants: Command): void {
  subcommand(plants, 'list', 'list plants in ascending id order, following every page')
    .addOption(tagOption('only plants with this tag'))
    .addOption(
      new Option('--limit <n>', 'at most this many plants').argParser(
        positiveInteger('plants', 9_999_999),
      ),
    )
    .addOption(jsonOption())
    .action(
      run(async (options: OutputOptions & { tag?: string; limit?: number }) => {
        exitQuietlyOnClosedPipe();
        const client = clientOf(options);
        const limit = options.limit ?? Infinity;
        const query = { limit: Math.min(limit, PAGE), ...(options.tag && { tag: options.tag }) };
        const table: Plant[] = [];
        let count = 0;
        for await (const plant of client.plants.list(query)) {
          if (count++ === limit) break;
          // A table needs every row for its widths; JSON Lines go out as they come.
          if (options.json) await write(plantJson(plant));
          else table.push(plant);
        }
        if (!options.json) await show(table, options);
      }),
    );
}

function readCommands(plants: Command): void {
  subcommand(plants, 'get', 'show one plant')
    .argument('<id>', 'the plant id', plantIdArgument)
    .addOption(jsonOption())
    .action(
      run(async (id: bigint, options: OutputOptions) => {
        await show([await clientOf(options).plants.get(id)], options);
      }),
    );

  const create = subcommand(plants, 'create', 'create a plant and show it')
    .requiredOption('--name <name>', 'the name')
    .addOption(tagOption('a tag'))
    .addOption(
      new Option('--id <id>', 'the id (any int64); the server picks one if absent').argParser(
        plantIdArgument,
      ),
    )
    .option('--idempotency-key <key>', 'makes running the same command again safe (for 24 h)')
    .addOption(jsonOption());
  eachOptionOnce(create).action(
    run(
      async (
        options: OutputOptions & {
          name: string;
          tag?: string;
          id?: bigint;
          idempotencyKey?: string;
        },
      ) => {
        const plant = await clientOf(options).plants.create(
          {
            name: options.name,
            ...(options.id !== undefined && { id: options.id }),
            ...(options.tag !== undefined && { tag: options.tag }),
          },
          options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey },
        );
        await show([plant], options);
      },
    ),
  );
}

function writeCommands(plants: Command): void {
  const update = subcommand(plants, 'update', 'change the name or tag of a plant and show it')
    .argument('<id>', 'the plant id', plantIdArgument)
    .option('--name <name>', 'the new name')
    .addOption(tagOption('the new tag'))
    .option('--no-tag', 'remove the tag')
    .addOption(jsonOption());
  eachOptionOnce(update).action(
    run(async (id: bigint, options: OutputOptions & { name?: string; tag?: string | false }) => {
      const patch: PlantPatch = {
        ...(options.name !== undefined && { name: options.name }),
        ...(options.tag !== undefined && { tag: options.tag === false ? null : options.tag }),
      };
      if (Object.keys(patch).length === 0) {
        throw new UsageError('nothing to change: give --name, --tag or --no-tag');
      }
      await show([await clientOf(options).plants.update(id, patch)], options);
    }),
  );

  subcommand(plants, 'delete', 'delete a plant')
    .argument('<id>', 'the plant id', plantIdArgument)
    .action(
      run(async (id: bigint, options: ServerOptions) => {
        await clientOf(options).plants.delete(id);
        process.stderr.write(`deleted plant ${id}\n`);
      }),
    );
}

function exportCommand(plants: Command): void {
  subcommand(plants, 'export', 'write every plant as JSON Lines to stdout, as import reads them')
    .addOption(tagOption('only plants with this tag'))
    .action(
      run(async (options: ServerOptions & { tag?: string }) => {
        exitQuietlyOnClosedPipe();
        const client = clientOf(options);
        const bar = progress(process.stderr, { verb: 'exported', unit: 'plants' });
        let count = 0;
        const query = { limit: PAGE, ...(options.tag && { tag: options.tag }) };
        for await (const page of client.pages('/plants', { query })) {
          await write(page.data.map(plantJson).join(''));
          count += page.data.length;
          bar.update(count);
        }
        bar.finish(count);
      }),
    );
}

function describeImportFailure(failure: ImportFailure): string {
  const answer = failure.status === undefined ? '' : `${failure.status} (${failure.error ?? '-'}) `;
  return forTerminal(`line ${failure.line}: ${answer}${failure.message}`);
}

const AGAIN = 'run the same command again to go on: lines already imported are not created twice';

function report(file: string, summary: ImportSummary, options: OutputOptions): string[] {
  const failed = summary.failures.length;
  const lines = [
    `${forTerminal(file)}: ${summary.lines} lines: ${summary.created} created, ` +
      `${summary.replayed} created by an earlier run, ${failed} failed`,
    ...summary.failures.slice(0, LISTED_FAILURES).map(describeImportFailure),
  ];
  if (failed > LISTED_FAILURES) {
    lines.push(`... and ${failed - LISTED_FAILURES} more (--json lists every one)`);
  }
  if (summary.stopped !== undefined) {
    lines.push(
      `stopped at line ${summary.stoppedAt}: ${describeFailure(summary.stopped, options.url)}`,
      AGAIN,
    );
  } else if (summary.interruptedAt !== undefined) {
    lines.push(`interrupted before line ${summary.interruptedAt}`, AGAIN);
  }
  return lines;
}

function importCommand(plants: Command): void {
  subcommand(
    plants,
    'import',
    'create a plant for each line of a JSON Lines file; safe to run again',
  )
    .argument(
      '<file>',
      'one plant per line: {"id": ..., "name": ..., "tag": ...} (id and tag optional)',
    )
    .option(
      '--batch <name>',
      "what tells this import apart from others (default: the file's absolute path)",
    )
    .addOption(
      // 16: enough for a SQLite server to commit several lines with each sync of its disk
      // (1.3 to 1.6 times the lines a second of 4, measured with the server beside the CLI).
      new Option('--concurrency <n>', 'requests in flight at once')
        .default(16)
        .argParser(positiveInteger('requests', 64)),
    )
    .option('--json', 'the failed lines as JSON objects on stdout')
    .action(
      run(
        async (file: string, options: OutputOptions & { batch?: string; concurrency: number }) => {
          const client = clientOf(options);
          const size = statSync(file).size;
          const bar = progress(process.stderr, { verb: 'imported', unit: 'lines' });
          // Ctrl-C sends no more lines, and the summary says what was done; a second one
          // (no handler left) ends the process at once.
          const interrupt = new AbortController();
          const stop = () => interrupt.abort();
          process.once('SIGINT', stop);
          const summary = await importFile(client, file, {
            batch: options.batch ?? realpathSync(file),
            concurrency: options.concurrency,
            size,
            progress: bar,
            signal: interrupt.signal,
          }).finally(() => process.off('SIGINT', stop));
          bar.finish();
          if (options.json)
            await write(summary.failures.map((f) => `${JSON.stringify(f)}\n`).join(''));
          process.stderr.write(`${report(file, summary, options).join('\n')}\n`);
          if (summary.interruptedAt !== undefined) process.exitCode = INTERRUPTED;
          else if (summary.failures.length > 0 || summary.stopped !== undefined)
            process.exitCode = FAILED;
        },
      ),
    );
}

/** `plantstore plants ...`: a client of a running server, using @plantstore/client. */
export function plantsCommand(): Command {
  const plants = new Command('plants').description(
    'list, read, create, update, delete, import and export plants on a running server',
  );
  listCommand(plants);
  readCommands(plants);
  writeCommands(plants);
  importCommand(plants);
  exportCommand(plants);
  return plants;
}
