// What the `plantstore plants` commands share: reaching the server with the client, the
// id argument, and the output of plants for people (a table) and for scripts (JSON Lines).
import { once } from 'node:events';
import { Option } from 'commander';
import {
  createClient,
  type Plant,
  PlantstoreClient,
  PlantstoreError,
  stringifyBody,
} from '@plantstore/client';
import { httpFetch } from './http-fetch.js';
import { argument, int64Argument, UsageError } from './options.js';
import { forTerminal } from './terminal-text.js';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** Attempts of a request meeting `429`, `503` or 40903, each after the wait asked for. */
const ATTEMPTS = 5;

export interface ServerOptions {
  url: string;
  token?: string;
}

export const urlOption = () =>
  new Option('--url <url>', 'the server to call')
    .env('PLANTSTORE_URL')
    .default(DEFAULT_URL)
    .argParser(
      argument((text) => {
        const url = URL.canParse(text) ? new URL(text) : undefined;
        if (url?.protocol !== 'http:' && url?.protocol !== 'https:') {
          throw new Error(`"${text}" is not an http:// or https:// URL`);
        }
        return text;
      }),
    );

export const tokenOption = () =>
  new Option(
    '--token <token>',
    'access token (from "plantstore token create"); prefer the variable, which ps does not show',
  ).env('PLANTSTORE_TOKEN');

export const plantIdArgument = int64Argument('the plant id');

export { UsageError };

/** A client of the server the options name; a usage error without a token. */
export function clientOf(options: ServerOptions): PlantstoreClient {
  if (options.token === undefined || options.token === '') {
    throw new UsageError(
      'no access token: pass --token or set PLANTSTORE_TOKEN ("plantstore token create" makes one)',
    );
  }
  return createClient({
    baseUrl: options.url,
    token: options.token,
    retry: { attempts: ATTEMPTS },
    headers: { 'user-agent': 'plantstore-cli' },
    fetch: httpFetch,
  });
}

/**
 * Codes with which fetch fails once the connection was made: the server closed or reset it
 * before an answer was read. A server refusing a request before its body arrived (413, 401)
 * closes the connection, and the client's next write of the body can fail with these before
 * fetch reads the answer; that server was reached, and is likely to answer the next request.
 */
const CLOSED_AFTER_CONNECT = new Set(['EPIPE', 'ECONNRESET', 'UND_ERR_SOCKET']);

const causeOf = (error: unknown) =>
  error instanceof TypeError
    ? (error.cause as { message?: string; code?: string } | undefined)
    : undefined;

/** `error` as words if the server closed the connection before answering, else undefined. */
export function closedBeforeAnswer(error: unknown, server = 'the server'): string | undefined {
  const cause = causeOf(error);
  if (cause?.code === undefined || !CLOSED_AFTER_CONNECT.has(cause.code)) return undefined;
  return `${server} closed the connection before answering (${cause.message ?? cause.code})`;
}

/** What went wrong in words for the user: the server's refusal, or why it was not reached. */
export function describeFailure(error: unknown, url: string): string {
  if (error instanceof PlantstoreError) {
    const hint = error.status === 401 ? ' (check --token or PLANTSTORE_TOKEN)' : '';
    return forTerminal(`${error.message}${hint}`);
  }
  const closed = closedBeforeAnswer(error, url);
  if (closed !== undefined) return forTerminal(closed);
  const cause = causeOf(error);
  if (cause !== undefined) {
    return forTerminal(`cannot reach ${url}: ${cause.message ?? cause.code}`);
  }
  return forTerminal((error as Error).message);
}

/** One plant as a JSON line, ids as exact integers. */
export const plantJson = (plant: Plant) => `${stringifyBody(plant)}\n`;

/** Plants as a table for people, what a terminal would act on escaped. */
export function plantTable(plants: readonly Plant[]): string {
  const header = ['ID', 'NAME', 'TAG'];
  const rows = plants.map((plant) =>
    [String(plant.id), plant.name, plant.tag ?? '-'].map((cell) => forTerminal(cell)),
  );
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map((row) => row[i]!.length)),
  );
  return [header, ...rows]
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
    .concat('\n');
}

/** Writes to stdout, waiting when the reader is slower than we are. */
export async function write(text: string): Promise<void> {
  if (!process.stdout.write(text)) await once(process.stdout, 'drain');
}

/** `plantstore plants export | head` closes the pipe early: that is the reader being done. */
export function exitQuietlyOnClosedPipe(): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(0);
  });
}
