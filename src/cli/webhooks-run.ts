// How a `plantstore webhooks` command runs: the options every one takes, what goes wrong as
// one line on stderr with an exit code, and what it writes to stdout.
import { Command, Option } from 'commander';
import { PlantstoreError } from '@plantstore/client';
import { int64Argument, positiveInteger, UsageError } from './options.js';
import {
  describeFailure,
  exitQuietlyOnClosedPipe,
  type ServerOptions,
  tokenOption,
  urlOption,
  write,
} from './plants-client.js';
import {
  type Endpoint,
  endpointJson,
  endpointTable,
  type EndpointWithSecret,
  secretJson,
  secretTable,
} from './webhooks-table.js';

/** Exit codes as every command: 1 failed, 2 the command line was wrong. */
const FAILED = 1;
const USAGE = 2;
/** The most a page of the API holds. */
const PAGE = 1000;

export interface OutputOptions extends ServerOptions {
  json?: boolean;
}

export interface PageOptions extends OutputOptions {
  limit?: number;
  after?: bigint;
}

/** What went wrong; for a token without the webhook scopes, how to make one that has them. */
function failure(error: unknown, url: string): string {
  const scopeMissing = error instanceof PlantstoreError && error.code === 40301;
  const hint = scopeMissing
    ? ' (a token with the webhook scopes: plantstore token create' +
      ' --scopes plants:read,webhooks:read,webhooks:write)'
    : '';
  return `${describeFailure(error, url)}${hint}`;
}

/** Runs a command's work, turning what goes wrong into one line on stderr and an exit code. */
export function run<A extends unknown[]>(work: (...args: A) => Promise<void>) {
  return async (...args: A) => {
    const options = args.at(-2) as ServerOptions;
    try {
      await work(...args);
    } catch (error) {
      const usage = error instanceof UsageError;
      process.stderr.write(`plantstore: ${usage ? error.message : failure(error, options.url)}\n`);
      process.exitCode = usage ? USAGE : FAILED;
    }
  };
}

/** A subcommand with the options every webhooks command takes. */
export function subcommand(parent: Command, name: string, description: string): Command {
  return parent
    .command(name)
    .description(description)
    .addOption(urlOption())
    .addOption(tokenOption());
}

export const jsonOption = () =>
  new Option('--json', 'one JSON object per line (ids exact) instead of a table');

/** `--limit`, `--after` and `--json`, for the commands that list pages. */
export const pagingOptions = (command: Command, what: string, after: string) =>
  command
    .addOption(
      new Option('--limit <n>', `at most this many ${what}`).argParser(
        positiveInteger(what, 9_999_999),
      ),
    )
    .addOption(new Option('--after <id>', after).argParser(int64Argument('--after')))
    .addOption(jsonOption());

/** The query of the first page: the API's largest page unless `--limit` asks for fewer. */
export const pageQuery = (options: PageOptions) => ({
  limit: Math.min(options.limit ?? PAGE, PAGE),
  ...(options.after !== undefined && { after: options.after }),
});

/**
 * Writes the items of the pages, up to `--limit`: JSON Lines as they come, or one table at
 * the end (a table needs every row for its widths).
 */
export async function showPages<T>(
  pages: AsyncIterable<{ data: T[] }>,
  options: PageOptions,
  json: (item: T) => string,
  table: (items: T[]) => string,
): Promise<void> {
  exitQuietlyOnClosedPipe();
  const limit = options.limit ?? Infinity;
  const rows: T[] = [];
  let count = 0;
  for await (const page of pages) {
    for (const item of page.data.slice(0, limit - count)) {
      count++;
      if (options.json) await write(json(item));
      else rows.push(item);
    }
    if (count >= limit) break;
  }
  if (!options.json) await write(table(rows));
}

export const showEndpoint = (endpoint: Endpoint, options: OutputOptions) =>
  write(options.json ? endpointJson(endpoint) : endpointTable([endpoint]));

/** The new secret, on stdout this once; what to do with it on stderr. */
export async function showSecret(
  endpoint: EndpointWithSecret,
  options: OutputOptions,
  note: string,
): Promise<void> {
  await write(options.json ? secretJson(endpoint) : secretTable(endpoint));
  process.stderr.write(`${note}\n`);
}
