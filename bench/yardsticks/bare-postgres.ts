/**
 * The bare PostgreSQL yardstick: node:http + pg, a pool of 10 connections, named prepared
 * statements, one statement per request, the token checked in memory (the usable tokens
 * read once at start), PostgreSQL's default settings (a commit waits for its WAL flush, as
 * plantstore's default durability does). Server-assigned ids come from plantstore's sequence
 * plant_id_seq, in the same statement as the insert (without plantstore's record of taken
 * ids: that is one of the features measured).
 *
 *   node --import tsx bench/yardsticks/bare-postgres.ts --database-url URL [--port N]
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pg from 'pg';
import {
  type Answer,
  BAD_ID,
  BAD_PLANT,
  BAD_QUERY,
  createdAnswer,
  DELETED,
  failure,
  INTERNAL,
  isJsonType,
  MEDIA_TYPE,
  NO_BODY,
  noPlant,
  pageAnswer,
  parseInt64,
  parseListQuery,
  plantAnswer,
  type PlantRow,
  TokenCheck,
  type TokenGrant,
  UNAVAILABLE,
  UNAVAILABLE_CODE,
  validPlant,
} from './common.js';
import { hasBody, listen, readJson, write, yardstickArgs } from './node-http.js';

const args = yardstickArgs();
if (args.databaseUrl === undefined) throw new Error('bare-postgres: --database-url is required');
// int8 stays text: ids are exact, and go into the JSON as digits.
const pool = new pg.Pool({ connectionString: args.databaseUrl, max: 10 });
pool.on('error', (error) => process.stderr.write(`bare-postgres: idle client: ${error.message}\n`));

const grants = (
  await pool.query<TokenGrant>(
    `SELECT hash, scopes FROM tokens
     WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`,
  )
).rows;
const tokens = new TokenCheck(grants, (t) => createHash('sha256').update(t).digest('hex'));

const SQL = {
  getOne: 'SELECT id, name, tag FROM plants WHERE id = $1',
  remove: 'DELETE FROM plants WHERE id = $1',
  pageAll: 'SELECT id, name, tag FROM plants ORDER BY id LIMIT $1',
  pageAfter: 'SELECT id, name, tag FROM plants WHERE id > $1 ORDER BY id LIMIT $2',
  pageTag: 'SELECT id, name, tag FROM plants WHERE tag = $1 ORDER BY id LIMIT $2',
  pageTagAfter: 'SELECT id, name, tag FROM plants WHERE tag = $1 AND id > $2 ORDER BY id LIMIT $3',
  insert: `INSERT INTO plants (id, name, tag) VALUES (nextval('plant_id_seq'), $1, $2)
           RETURNING id, name, tag`,
} as const;

/** Runs one named prepared statement and writes what `answer` makes of its result. */
function run(
  res: ServerResponse,
  name: keyof typeof SQL,
  values: unknown[],
  answer: (result: pg.QueryResult<PlantRow>) => Answer,
): void {
  pool.query<PlantRow>({ name, text: SQL[name], values }).then(
    (result) => write(res, answer(result)),
    (error: unknown) => {
      const code = (error as { code?: unknown }).code;
      const unavailable = typeof code === 'string' && UNAVAILABLE_CODE.test(code);
      if (!unavailable) process.stderr.write(`bare-postgres: ${String(error)}\n`);
      write(res, unavailable ? UNAVAILABLE : INTERNAL);
    },
  );
}

function plant(req: IncomingMessage, res: ServerResponse, idText: string): void {
  const method = req.method;
  if (method !== 'GET' && method !== 'DELETE') {
    const allow = { allow: 'GET, PATCH, DELETE' };
    return write(res, failure(405, 40501, 'The resource does not support this method.', allow));
  }
  const scope = method === 'GET' ? 'plants:read' : 'plants:write';
  const refusal = tokens.refusal(req.headers.authorization, scope);
  if (refusal !== undefined) return write(res, refusal);
  const id = parseInt64(idText);
  if (id === undefined) return write(res, BAD_ID);
  if (hasBody(req)) return write(res, NO_BODY);
  const text = String(id);
  if (method === 'GET') {
    return run(res, 'getOne', [text], (r) => (r.rows[0] ? plantAnswer(r.rows[0]) : noPlant(id)));
  }
  run(res, 'remove', [text], (r) => (r.rowCount === 0 ? noPlant(id) : DELETED));
}

function list(req: IncomingMessage, res: ServerResponse, query: string): void {
  const refusal = tokens.refusal(req.headers.authorization, 'plants:read');
  if (refusal !== undefined) return write(res, refusal);
  const page = parseListQuery(query);
  if (page === undefined) return write(res, BAD_QUERY);
  if (hasBody(req)) return write(res, NO_BODY);
  const { limit, after, tag } = page;
  // One row more than asked tells whether another page follows.
  const answer = (r: pg.QueryResult<PlantRow>) => pageAnswer(r.rows, limit, tag);
  if (tag !== undefined) {
    if (after === undefined) return run(res, 'pageTag', [tag, limit + 1], answer);
    return run(res, 'pageTagAfter', [tag, String(after), limit + 1], answer);
  }
  if (after === undefined) return run(res, 'pageAll', [limit + 1], answer);
  run(res, 'pageAfter', [String(after), limit + 1], answer);
}

function create(req: IncomingMessage, res: ServerResponse): void {
  const refusal = tokens.refusal(req.headers.authorization, 'plants:write');
  if (refusal !== undefined) return write(res, refusal);
  if (!isJsonType(req.headers['content-type'])) return write(res, MEDIA_TYPE);
  readJson(req, (body, bad) => {
    if (bad !== undefined) return write(res, bad);
    if (!validPlant(body)) return write(res, BAD_PLANT);
    run(res, 'insert', [body.name, body.tag ?? null], (r) => createdAnswer(r.rows[0]!));
  });
}

listen({ plant, list, create }, args.port, () => void pool.end());
