import {
  chmodSync,
  closeSync,
  fchmodSync,
  mkdirSync,
  openSync,
  type Stats,
  statSync,
} from 'node:fs';
import { dirname, resolve } from 'node:path';

const DIRECTORY_MODE = 0o700;
const FILE_MODE = 0o600;

/**
 * Creates the database file, and its directory, readable by the service's user only: the
 * file holds every plant and the token hashes, and SQLite gives the `-wal` and `-shm`
 * files it makes the mode of the database file. A directory or file that exists already
 * keeps its mode: it is the user's, and so is the choice. Throws an error that names the
 * database and what stands in the way.
 */
export function createPrivately(file: string): void {
  const path = resolve(file);
  try {
    makeDirectories(dirname(path));
    createFile(path);
  } catch (error) {
    throw new Error(`cannot create the database ${path}: ${(error as Error).message}`);
  }
}

/**
 * `mkdir -p`, by hand: Node's recursive mkdir spins forever at 100% CPU where a directory
 * exists but answers ENOENT for any child (anywhere under /proc). Here every mkdir is tried
 * once, and its error is the answer.
 */
function makeDirectories(directory: string): void {
  const missing: string[] = [];
  let at = directory;
  for (let stats = statOf(at); stats === undefined; stats = statOf(at)) {
    missing.unshift(at);
    if (dirname(at) === at) break;
    at = dirname(at);
  }
  const existing = statOf(at);
  if (existing !== undefined && !existing.isDirectory()) {
    throw new Error(`${at} is a file, not a directory`);
  }
  for (const made of missing) {
    try {
      mkdirSync(made, { mode: DIRECTORY_MODE });
    } catch (error) {
      // Made by another process meanwhile (a server and a CLI starting together): theirs.
      if ((error as NodeJS.ErrnoException).code === 'EEXIST' && statOf(made)?.isDirectory()) {
        continue;
      }
      throw error;
    }
    // The umask applies to the mode given; set it on the directories made here, and only those.
    chmodSync(made, DIRECTORY_MODE);
  }
}

/** The path's status, or undefined when nothing is there (or a parent is a file). */
function statOf(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
}

function createFile(path: string): void {
  let fd: number;
  try {
    // Exclusive: the file is ours only if this call made it.
    fd = openSync(path, 'wx', FILE_MODE);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    if (statOf(path)?.isDirectory()) throw new Error(`${path} is a directory, not a file`);
    return;
  }
  try {
    fchmodSync(fd, FILE_MODE);
  } finally {
    closeSync(fd);
  }
}

/** Whether a database file is at `file`; a directory there is an error, not a database. */
export function databaseFileExists(file: string): boolean {
  const path = resolve(file);
  const stats = statOf(path);
  if (stats?.isDirectory()) throw new Error(`${path} is a directory, not a database file`);
  return stats !== undefined;
}
