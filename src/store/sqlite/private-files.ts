import { chmodSync, closeSync, fchmodSync, mkdirSync, openSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

const DIRECTORY_MODE = 0o700;
const FILE_MODE = 0o600;

/**
 * Creates the database file, and its directory, readable by the service's user only: the
 * file holds every plant and the token hashes, and SQLite gives the `-wal` and `-shm`
 * files it makes the mode of the database file. A directory or file that exists already
 * keeps its mode: it is the user's, and so is the choice.
 */
export function createPrivately(file: string): void {
  const directory = resolve(dirname(file));
  const first = mkdirSync(directory, { recursive: true, mode: DIRECTORY_MODE });
  // The umask applies to the mode given; set it on the directories made here, and only those.
  if (first !== undefined) {
    for (let made = directory; ; made = dirname(made)) {
      chmodSync(made, DIRECTORY_MODE);
      if (made === first || made === dirname(made)) break;
    }
  }
  let fd: number;
  try {
    // Exclusive: the file is ours only if this call made it.
    fd = openSync(file, 'wx', FILE_MODE);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw error;
  }
  try {
    fchmodSync(fd, FILE_MODE);
  } finally {
    closeSync(fd);
  }
}
