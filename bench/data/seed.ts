/**
 * The benchmark's data: a database migrated and given tokens by plantstore's own code, plants
 * 1..n added in bulk, and the keepers that restore it between turns so that every turn meets
 * the same table.
 */
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { Keeper } from '../harness/turn.js';
import { DEFAULT_SCOPES, type Scope } from '../../src/core/scopes.js';
import { TokenService } from '../../src/service/token-service.js';
import { openStore, type StoreConfig } from '../../src/store/open.js';

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

/**
 * One token with `scopes`, made the way `plantstore token create` makes it, the database
 * migrated (a SQLite file created) first.
 */
export async function createToken(
  config: StoreConfig,
  name: string,
  scopes: Scope[],
): Promise<string> {
  const store = await openStore({ ...config, durability: 'process' });
  try {
    return (await new TokenService(store.tokens).create({ name, scopes, expiresInMs: null }))
      .token;
  } finally {
    await store.close();
  }
}

/**
 * The ids clients chose above a counter at `plants`: every other id, plants + 2, plants + 4,
 * ..., `clientIds` of them. Every other server-assigned id then meets one to skip, the most
 * skips a create can meet; a server create takes plants + 1, + 3, ...
 */
export const clientIdsAbove = (plants: number, clientIds: number) => ({
  first: plants + 2,
  last: plants + 2 * clientIds,
});

/** The webhook messages that ended (delivered, failed): the pending ones stay. */
export const ENDED = "SELECT id FROM webhook_messages WHERE status <> 'pending'";

/**
 * The SQL condition (on `id`) of the plants a turn created, to be deleted after it: above
 * the seeded ones, and not one of the clients' (which the server skipped). Parameters: the
 * seeded plants, and the last client id (the seeded plants when there are none).
 */
export const CREATED_BY_A_TURN = (p: (n: 1 | 2) => string): string =>
  `id > ${p(1)} AND NOT (id <= ${p(2)} AND (id - ${p(1)}) % 2 = 0)`;

/**
 * A new SQLite database at `file` with tokens and plants 1..n; with `clientIds`, that many
 * plants more whose ids clients chose above the counter (clientIdsAbove), recorded as
 * plantstore records them: a run of one id each in plant_id_runs (src/store/sqlite/plant-ids.ts).
 */
export async function seedSqlite(
  file: string,
  n: number,
  tokensFile: string,
  clientIds = 0,
): Promise<void> {
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
      if (clientIds > 0) {
        const { first, last } = clientIdsAbove(n, clientIds);
        const ids = `WITH RECURSIVE ids(x) AS (SELECT ? UNION ALL SELECT x + 2 FROM ids WHERE x < ?)`;
        db.prepare(`${ids} INSERT INTO plants (id, name, tag) ${PLANT_ROWS}`).run(first, last);
        db.prepare(`${ids} INSERT INTO plant_id_runs (first, last) SELECT x, x FROM ids`).run(
          first,
          last,
        );
      }
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

export class SqliteKeeper implements Keeper {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement<[number, number]>;
  private readonly remove: Database.Statement<[{ plants: number; last: number }]>;

  /** `clientIds`: the data set's plants whose ids clients chose (seedSqlite), kept by trim. */
  constructor(
    file: string,
    private readonly clientIds = 0,
  ) {
    this.db = new Database(file, { fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
    // JavaScript numbers bind as REAL: cast, or the names would read `plant 12.0`.
    this.insert = this.db.prepare(
      `WITH RECURSIVE ids(x) AS (SELECT CAST(? AS INTEGER) UNION ALL SELECT x + 1 FROM ids WHERE x < ?)
       INSERT OR IGNORE INTO plants (id, name, tag) ${PLANT_ROWS}`,
    );
    this.remove = this.db.prepare(
      `DELETE FROM plants WHERE ${CREATED_BY_A_TURN((n) => (n === 1 ? '@plants' : '@last'))}`,
    );
  }

  async refill(from: number, to: number): Promise<void> {
    if (to >= from) this.insert.run(from, to);
    this.checkpoint();
  }

  async trim(plants: number): Promise<void> {
    this.remove.run({ plants, last: clientIdsAbove(plants, this.clientIds).last });
    this.checkpoint();
  }

  async clearEndedMessages(): Promise<number> {
    this.db.exec(`DELETE FROM webhook_attempts WHERE message_id IN (${ENDED})`);
    const messages = this.db.prepare(`DELETE FROM webhook_messages WHERE id IN (${ENDED})`).run();
    this.checkpoint();
    return messages.changes;
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
