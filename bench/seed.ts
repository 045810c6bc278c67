import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const PLANTSTORE_BIN = `${ROOT}bin/plantstore`;

// Every plant is `plant <id>`; one in four carries the tag `shade` (so the tag index is used).
const PLANT_ROWS = `SELECT x, 'plant ' || x, CASE WHEN x % 4 = 0 THEN 'shade' END FROM ids`;

/**
 * Creates `file` with plantstore's own migrations (the CLI creates and migrates it), a token
 * with both scopes, and plants 1..n inserted in one transaction. Returns the token.
 */
export function seed(file: string, n: number): string {
  const token = execFileSync(process.execPath, [PLANTSTORE_BIN, 'token', 'create', '--db', file], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  }).trim();
  const db = new Database(file);
  try {
    db.pragma('synchronous = OFF');
    db.transaction(() => {
      db.prepare(
        `WITH RECURSIVE ids(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM ids WHERE x < ?)
         INSERT INTO plants (id, name, tag) ${PLANT_ROWS}`,
      ).run(n);
      // Server-assigned ids go on above the seeded ones, as if the server had assigned them.
      db.prepare('UPDATE plant_id_counter SET last = ?').run(n);
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  return token;
}

/**
 * Puts back plants a DELETE turn removed (ids from..to, as seeded), between turns, so that
 * the table keeps its size and every DELETE meets an existing plant.
 */
export class Refiller {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement;

  constructor(file: string) {
    this.db = new Database(file, { fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
    this.insert = this.db.prepare(
      `WITH RECURSIVE ids(x) AS (SELECT ? UNION ALL SELECT x + 1 FROM ids WHERE x < ?)
       INSERT OR IGNORE INTO plants (id, name, tag) ${PLANT_ROWS}`,
    );
  }

  refill(from: number, to: number): void {
    if (to >= from) this.insert.run(from, to);
  }

  close(): void {
    this.db.close();
  }
}
