/**
 * The bare SQLite yardstick: node:http + better-sqlite3 doing plantstore's per-request work
 * and nothing more (bearer token checked in memory, strict int64 id, prepared statements,
 * same statuses and bodies), with the settings of sqlite.ts: WAL, synchronous=NORMAL, one
 * autocommit transaction per request.
 *
 *   node --import tsx bench/yardsticks/bare-sqlite.ts --db FILE [--port N]
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { openSqlite } from './sqlite.js';
import {
  BAD_ID,
  BAD_PLANT,
  BAD_QUERY,
  DELETED,
  failure,
  isJsonType,
  MEDIA_TYPE,
  NO_BODY,
  noPlant,
  parseInt64,
  parseListQuery,
  plantAnswer,
  createdAnswer,
  pageAnswer,
  TokenCheck,
  validPlant,
  guarded,
} from './common.js';
import { hasBody, listen, readJson, write, yardstickArgs } from './node-http.js';

const args = yardstickArgs();
if (args.db === undefined) throw new Error('bare-sqlite: --db FILE is required');
const { db, statements: sql, page: pageOf, create: createPlant, grants } = openSqlite(args.db);
const tokens = new TokenCheck(grants, (t) => createHash('sha256').update(t).digest('hex'));

function plant(req: IncomingMessage, res: ServerResponse, idText: string): void {
  const method = req.method;
  if (method !== 'GET' && method !== 'DELETE') {
    const allow = { allow: 'GET, PATCH, DELETE' };
    return write(res, failure(405, 40501, 'The resource does not support this method.', allow));
  }
  const refusal = tokens.refusal(
    req.headers.authorization,
    method === 'GET' ? 'plants:read' : 'plants:write',
  );
  if (refusal !== undefined) return write(res, refusal);
  const id = parseInt64(idText);
  if (id === undefined) return write(res, BAD_ID);
  if (hasBody(req)) return write(res, NO_BODY);
  write(
    res,
    guarded(() => {
      if (method === 'GET') {
        const row = sql.getOne.get(id);
        return row === undefined ? noPlant(id) : plantAnswer(row);
      }
      return sql.remove.run(id).changes === 0 ? noPlant(id) : DELETED;
    }),
  );
}

function list(req: IncomingMessage, res: ServerResponse, query: string): void {
  const refusal = tokens.refusal(req.headers.authorization, 'plants:read');
  if (refusal !== undefined) return write(res, refusal);
  const page = parseListQuery(query);
  if (page === undefined) return write(res, BAD_QUERY);
  if (hasBody(req)) return write(res, NO_BODY);
  write(
    res,
    guarded(() => pageAnswer(pageOf(page), page.limit, page.tag)),
  );
}

function create(req: IncomingMessage, res: ServerResponse): void {
  const refusal = tokens.refusal(req.headers.authorization, 'plants:write');
  if (refusal !== undefined) return write(res, refusal);
  if (!isJsonType(req.headers['content-type'])) return write(res, MEDIA_TYPE);
  readJson(req, (body, bad) => {
    if (bad !== undefined) return write(res, bad);
    if (!validPlant(body)) return write(res, BAD_PLANT);
    write(
      res,
      guarded(() => createdAnswer(createPlant(body.name, body.tag ?? null))),
    );
  });
}

listen({ plant, list, create }, args.port, () => db.close());
