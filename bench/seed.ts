/**
 * The benchmark's data: a database migrated and given tokens by plantstore's own code, plants
 * 1..n added in bulk, and the keepers that restore it between turns so that every turn meets
 * the same table.
 */
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { DEFAULT_SCOPES } from '../src/core/scopes.js';
import { TokenService } from '../src/service/token-service.js';
import { openStore, type StoreConfig } from '../src/store/open.js';

/**
 * Tokens the load takes in turn, one a request. With every token under plantstore's default
 * per-token limit (100,000 a minute), 64 of them carry up to about 100,000 requests a second
 * before any is refused; a refusal would show as errors and mark the row invalid.
 */
export const TOKEN_COUNT = 64;

/** Every plant is `plant <id>`; one in four carries the tag `shade` (so the tag index is used). */
export const PLANT_ROWS = `SELECT x, 'plant ' || x, CASE WHEN x % 4 = 0 THEN 'shade' END FROM ids`;

/**
 * Migrates the database (creating a SQLite file) and creates `count` tokens with both plant
 * scopes the way `plantstore token create` does; writes them to `tokensFile`, one a line.
 */
export async function createTokens(
  config: StoreConfig,
  tokensFile: string,
  count = TOKEN_COUNT,
): Promise<void> {
  const store = await openStore({ ...config, durability: 'process' });
  const tokens: string[] = [];
  try {
    const service = new TokenService(store.tokens);
    for (let i = 1; i <= count; i++) {
      const input = { name: `bench ${i}`, scopes: [...DEFAULT_SCOPES], expiresInMs: null };
      tokens.push((await service.create(input)).token);
    }
  } finally {
    await store.close();
  }
  writeFileSync(tokensFile, `${tokens.join('\n')}\n`);
}

/** A new SQLite database at `file` with tokens and plants 1..n. */
export async function seedSqlite(file: string, n: number, tokensFile: string): Promise<void> {
  await createTokens({ db: file }, tokensFile);
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
}

/**
 * Puts a server's table back between turns, outside the measured time: the plants a DELETE
 * turn removed, and the plants a POST turn added.
 */
export interface Keeper {
  /** Puts plants from..to back as seeded, where missing. */
  refill(from: number, to: number): Promise<void>;
  /** Deletes the plants with an id above `plants`. */
  trim(plants: number): Promise<void>;
  close(): Promise<void>;
}

export class SqliteKeeper implements Keeper {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement<[number, number]>;
  private readonly remove: Database.Statement<[number]>;

  constructor(file: string) {
    this.db = new Database(file, { fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
    // JavaScript numbers bind as REAL: cast, or the names would read `plant 12.0`.
    this.insert = this.db.prepare(
      `WITH RECURSIVE ids(x) AS (SELECT CAST(? AS INTEGER) UNION ALL SELECT x + 1 FROM ids WHERE x < ?)
       INSERT OR IGNORE INTO plants (id, name, tag) ${PLANT_ROWS}`,
    );
    this.remove = this.db.prepare('DELETE FROM plants WHERE id > ?');
  }

  async refill(from: number, to: number): Promise<void> {
    if (to >= from) this.insert.run(from, to);
    this.checkpoint();
  }

  async trim(plants: number): Promise<void> {
    this.remove.run(plants);
    this.checkpoint();
  }

  /**
   * Copies what this connection wrote into the database file now, so that the server's next
   * automatic checkpoint, inside a measured turn, does not pay for the harness's writes.
   */
  private checkpoint(): void {
    this.db.pragma('wal_checkpoint(PASSIVE)');
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
