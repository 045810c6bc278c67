// How statements run on SQLite: reads at once, writes in the next group-commit batch, with
// "cannot use the database" turned into StoreUnavailableError.

import { StoreUnavailableError } from '../store.js';
import type { GroupCommit } from './group-commit.js';

export function isSqliteError(error: unknown, code: string): boolean {
  return error instanceof Error && (error as { code?: unknown }).code === code;
}

// Errors that say the database cannot be used right now, rather than that the request is wrong.
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|FULL|READONLY)/;

function translate(error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNAVAILABLE.test(code)
    ? new StoreUnavailableError(error)
    : error;
}

/** Runs synchronous database work, turning "cannot use the database" into StoreUnavailableError. */
export function guard<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    throw translate(error);
  }
}

/**
 * Runs synchronous database work in the next group-commit batch (see group-commit.ts), with
 * "cannot use the database" turned into StoreUnavailableError as `guard` does.
 */
export function batchedWrites(batches: GroupCommit) {
  return <T>(work: () => T): Promise<T> =>
    batches.run(work).catch((error: unknown) => {
      throw translate(error);
    });
}
