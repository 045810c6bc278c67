import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { BODY_LIMIT } from '../api/limits.js';
import {
  type NewPlant,
  parseBody,
  type PlantstoreClient,
  PlantstoreError,
  stringifyBody,
} from '@plantstore/client';
import { closedBeforeAnswer } from './plants-client.js';
import type { Progress } from './progress.js';

/** A line that was not imported, and why. */
export interface ImportFailure {
  line: number;
  status?: number;
  error?: number;
  message: string;
}

export interface ImportSummary {
  /** Lines holding a plant (blank lines are not counted). */
  lines: number;
  created: number;
  /** Created by an earlier run of the same import: its Idempotency-Key was answered before. */
  replayed: number;
  failures: ImportFailure[];
  /**
   * Why the import stopped before the end of the file: the server could not be reached, or
   * refused the token (401, 403), which every line would meet.
   */
  stopped?: unknown;
  /** The line it stopped at. */
  stoppedAt?: number;
  /** The import was interrupted (Ctrl-C) before this line: no line from it on was sent. */
  interruptedAt?: number;
}

export interface ImportOptions {
  /** What makes the keys of this import its own: the file's absolute path unless given. */
  batch: string;
  /** Requests in flight at once. */
  concurrency: number;
  /** The file's size in bytes, for the fraction done. */
  size: number;
  progress: Progress;
  /** Called for each failure as it happens (for --json). */
  onFailure?: (failure: ImportFailure) => void;
  /** Aborted: send no more lines, wait for the answers to those sent, and say where. */
  signal?: AbortSignal;
}

/**
 * The Idempotency-Key of a line: the batch, the line's text and how many identical lines
 * came before it in the file. Running the same import again therefore sends every line with
 * the key it had the first time, even after lines were fixed or removed elsewhere in the
 * file, and two identical lines are still two plants.
 */
export function lineKey(batch: string, text: string, occurrence: number): string {
  const hash = createHash('sha256').update(JSON.stringify([batch, text, occurrence]));
  return `plantstore-import-${hash.digest('base64url')}`;
}

const NEW_PLANT_SHAPE = { properties: { id: { int64: true as const } } };

type Outcome = 'created' | 'replayed' | ImportFailure;

async function importLine(
  client: PlantstoreClient,
  line: number,
  text: string,
  key: string,
): Promise<Outcome> {
  let plant: unknown;
  try {
    plant = parseBody(text, NEW_PLANT_SHAPE);
  } catch (error) {
    return { line, message: `not JSON: ${(error as Error).message}` };
  }
  if (plant === null || typeof plant !== 'object' || Array.isArray(plant)) {
    return { line, message: 'not a JSON object' };
  }
  // The server would answer 413, but it answers before the body has arrived and closes the
  // connection, so under load the client can fail writing the body before it reads
  // the answer. The limit is the server's own constant: this CLI ships with the server, and
  // the OpenAPI document states it only in prose.
  const bytes = Buffer.byteLength(stringifyBody(plant));
  if (bytes > BODY_LIMIT) {
    return {
      line,
      message: `not sent: ${bytes} bytes as a request body, over the server's limit of ${BODY_LIMIT} bytes (${BODY_LIMIT / 1024} KiB)`,
    };
  }
  try {
    // The server checks the rest: what it refuses is reported with its reason.
    const answer = await client.request('post', '/plants', {
      body: plant as NewPlant,
      idempotencyKey: key,
    });
    return answer.headers.get('idempotent-replayed') === 'true' ? 'replayed' : 'created';
  } catch (error) {
    // The server was reached and dropped this request: the next may well go through, and
    // if the server is gone, the next one fails to connect and stops the import.
    const closed = closedBeforeAnswer(error);
    if (closed !== undefined) {
      return {
        line,
        message: `${closed}: it may have been created; running the import again is safe`,
      };
    }
    if (!(error instanceof PlantstoreError)) throw error;
    // A token the server does not take, or one without plants:write, would fail every line
    // alike (and, line after line, run into the failed-authentication limit): stop.
    if (error.status === 401 || error.status === 403) throw error;
    return {
      line,
      status: error.status,
      ...(error.code !== undefined && { error: error.code }),
      message: error.body?.message ?? error.message,
    };
  }
}

/** Creates a plant for each line of `file` (JSON Lines), `concurrency` at a time. */
export async function importFile(
  client: PlantstoreClient,
  file: string,
  options: ImportOptions,
): Promise<ImportSummary> {
  const summary: ImportSummary = { lines: 0, created: 0, replayed: 0, failures: [] };
  const seen = new Map<string, number>();
  const running = new Set<Promise<void>>();
  /** Bytes of the lines answered so far, blank ones included, for the fraction done. */
  let done = 0;
  let number = 0;
  const tally = (outcome: Outcome, size: number) => {
    if (outcome === 'created') summary.created++;
    else if (outcome === 'replayed') summary.replayed++;
    else {
      summary.failures.push(outcome);
      options.onFailure?.(outcome);
    }
    done += size;
    const count = summary.created + summary.replayed + summary.failures.length;
    const failed = `${summary.failures.length} failed`;
    options.progress.update(count, options.size ? done / options.size : 1, failed);
  };
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  for await (const raw of lines) {
    const size = Buffer.byteLength(raw) + 1;
    const text = ++number === 1 ? raw.replace(/^\uFEFF/, '') : raw;
    if (options.signal?.aborted) {
      summary.interruptedAt = number;
      break;
    }
    if (text.trim() === '') {
      done += size;
      continue;
    }
    summary.lines++;
    // 96 bits of the hash are enough to tell lines apart, and keep the map small.
    const digest = createHash('sha256').update(text).digest('base64url').slice(0, 16);
    const occurrence = seen.get(digest) ?? 0;
    seen.set(digest, occurrence + 1);
    const line = number;
    const task = importLine(client, line, text, lineKey(options.batch, text, occurrence))
      .then(
        (outcome) => tally(outcome, size),
        (error: unknown) => {
          // Not the server refusing the line: it could not be asked. The rest would fail alike.
          if (summary.stopped === undefined || line < summary.stoppedAt!) {
            summary.stopped = error;
            summary.stoppedAt = line;
          }
          summary.lines--;
        },
      )
      .finally(() => running.delete(task));
    running.add(task);
    if (running.size >= options.concurrency) await Promise.race(running);
    if (summary.stopped !== undefined) break;
  }
  await Promise.all(running);
  lines.close();
  summary.failures.sort((a, b) => a.line - b.line);
  return summary;
}
