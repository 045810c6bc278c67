/**
 * The bare reference: node:http + better-sqlite3 doing plantstore's per-request work and
 * nothing more (bearer token checked against its stored SHA-256 hash, strict int64 id,
 * prepared statements, same statuses and bodies), with SQLite's common setting: WAL,
 * synchronous=NORMAL, one autocommit transaction per request.
 *
 *   tsx bench/reference-server.ts --db FILE [--port N]   (or PLANTSTORE_DB, PORT)
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';

const { values } = parseArgs({ options: { db: { type: 'string' }, port: { type: 'string' } } });
const file = values.db ?? process.env.PLANTSTORE_DB;
if (file === undefined) throw new Error('reference-server: --db FILE is required');
const port = Number(values.port ?? process.env.PORT ?? 0);

const db = new Database(file, { fileMustExist: true });
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('busy_timeout = 200');
db.defaultSafeIntegers(true);

interface PlantRow {
  id: bigint;
  name: string;
  tag: string | null;
}
interface TokenRow {
  scopes: string;
  expires_at: bigint | null;
  revoked_at: bigint | null;
}

const tokenByHash = db.prepare('SELECT scopes, expires_at, revoked_at FROM tokens WHERE hash = ?');
const getOne = db.prepare('SELECT id, name, tag FROM plants WHERE id = ?');
const remove = db.prepare('DELETE FROM plants WHERE id = ?');
const insert = db.prepare('INSERT INTO plants (name, tag) VALUES (?, ?) RETURNING id, name, tag');
const pageAll = db.prepare('SELECT id, name, tag FROM plants ORDER BY id LIMIT ?');
const pageAfter = db.prepare('SELECT id, name, tag FROM plants WHERE id > ? ORDER BY id LIMIT ?');

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const CANONICAL_DECIMAL = /^(?:0|-?[1-9][0-9]{0,18})$/;
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*)$/i;
const REALM = 'Bearer realm="plantstore"';
const MAX_BODY = 64 * 1024;
const utf8 = new TextDecoder('utf-8', { fatal: true });
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|FULL|READONLY)/;

function parseInt64(text: string): bigint | undefined {
  if (!CANONICAL_DECIMAL.test(text)) return undefined;
  const value = BigInt(text);
  return value >= INT64_MIN && value <= INT64_MAX ? value : undefined;
}

function send(res: ServerResponse, status: number, body?: string, headers = {}): void {
  if (body === undefined) {
    res.writeHead(status, headers).end();
    return;
  }
  res
    .writeHead(status, {
      ...headers,
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    })
    .end(body);
}

function fail(res: ServerResponse, status: number, code: number, message: string, headers = {}) {
  send(res, status, JSON.stringify({ error: code, message }), headers);
}

const plantJson = (p: PlantRow): string =>
  `{"id":${p.id},"name":${JSON.stringify(p.name)}` +
  (p.tag === null ? '}' : `,"tag":${JSON.stringify(p.tag)}}`);

/** true when the request may proceed; otherwise the 401/403 has been sent. */
function authorized(req: IncomingMessage, res: ServerResponse, scope: string): boolean {
  const token = BEARER.exec(req.headers.authorization ?? '')?.[1];
  if (token === undefined) {
    fail(res, 401, 40102, 'Send the header "Authorization: Bearer <ACCESS_TOKEN>".', {
      'www-authenticate': REALM,
    });
    return false;
  }
  const hash = createHash('sha256').update(token).digest('hex');
  const row = tokenByHash.get(hash) as TokenRow | undefined;
  const usable =
    row !== undefined &&
    row.revoked_at === null &&
    (row.expires_at === null || row.expires_at > BigInt(Date.now()));
  if (!usable) {
    fail(res, 401, 40101, 'The access token is unknown, revoked or expired.', {
      'www-authenticate': `${REALM}, error="invalid_token"`,
    });
    return false;
  }
  if (!row.scopes.split(' ').includes(scope)) {
    fail(res, 403, 40301, `This operation needs the scope "${scope}".`, {
      'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
    });
    return false;
  }
  return true;
}

const hasBody = (req: IncomingMessage): boolean =>
  req.headers['transfer-encoding'] !== undefined ||
  (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');

function plantById(req: IncomingMessage, res: ServerResponse, idText: string): void {
  const method = req.method;
  if (method !== 'GET' && method !== 'DELETE') {
    fail(res, 405, 40501, 'The resource does not support this method.', {
      allow: 'GET, PATCH, DELETE',
    });
    return;
  }
  if (!authorized(req, res, method === 'GET' ? 'plants:read' : 'plants:write')) return;
  const id = parseInt64(idText);
  if (id === undefined) return fail(res, 400, 40001, 'The plant id must be a decimal int64.');
  if (hasBody(req)) return fail(res, 400, 40005, 'This operation takes no request body.');
  if (method === 'GET') {
    const row = getOne.get(id) as PlantRow | undefined;
    if (row === undefined) return fail(res, 404, 40401, `No plant has id ${id}.`);
    return send(res, 200, plantJson(row));
  }
  if (remove.run(id).changes === 0) return fail(res, 404, 40401, `No plant has id ${id}.`);
  send(res, 204);
}

function listPlants(req: IncomingMessage, res: ServerResponse, query: string): void {
  if (!authorized(req, res, 'plants:read')) return;
  let limit = 100;
  let after: bigint | undefined;
  for (const [key, value] of new URLSearchParams(query)) {
    const n = parseInt64(value);
    if (key === 'limit' && n !== undefined && n >= 1n && n <= 1000n) limit = Number(n);
    else if (key === 'after' && n !== undefined) after = n;
    else return fail(res, 400, 40002, 'A query parameter is missing, unknown or invalid.');
  }
  if (hasBody(req)) return fail(res, 400, 40005, 'This operation takes no request body.');
  // One row more than asked tells whether another page follows.
  const rows = (
    after === undefined ? pageAll.all(limit + 1) : pageAfter.all(after, limit + 1)
  ) as PlantRow[];
  const headers: Record<string, string> = {};
  if (rows.length > limit) {
    rows.length = limit;
    headers.link = `</plants?limit=${limit}&after=${rows[limit - 1]!.id}>; rel="next"`;
  }
  send(res, 200, `[${rows.map(plantJson).join(',')}]`, headers);
}

function validPlant(value: unknown): value is { name: string; tag?: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { name, tag, ...rest } = value as Record<string, unknown>;
  return (
    Object.keys(rest).length === 0 &&
    typeof name === 'string' &&
    name.length >= 1 &&
    name.length <= 100 &&
    name.trim() !== '' &&
    (tag === undefined || (typeof tag === 'string' && tag.length >= 1 && tag.length <= 50))
  );
}

function createPlant(req: IncomingMessage, res: ServerResponse): void {
  if (!authorized(req, res, 'plants:write')) return;
  const type = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') {
    return fail(res, 415, 41501, 'The request body has an unsupported media type.');
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY) chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > MAX_BODY) return fail(res, 413, 41301, 'The request body is larger than the limit.');
    let body: unknown;
    try {
      body = JSON.parse(utf8.decode(Buffer.concat(chunks)));
    } catch {
      return fail(res, 400, 40003, 'The request body is not well-formed JSON.');
    }
    if (!validPlant(body)) {
      return fail(res, 400, 40004, 'The request body does not match the schema.');
    }
    const { name, tag } = body;
    guarded(res, () => {
      const row = insert.get(name, tag ?? null) as PlantRow;
      send(res, 201, plantJson(row), { location: `/plants/${row.id}` });
    });
  });
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : url.slice(q + 1);
  if (path.startsWith('/plants/')) return plantById(req, res, path.slice('/plants/'.length));
  if (path === '/plants') {
    if (req.method === 'GET') return listPlants(req, res, query);
    if (req.method === 'POST') return createPlant(req, res);
    return fail(res, 405, 40501, 'The resource does not support this method.', {
      allow: 'GET, POST',
    });
  }
  if (path === '/healthz' && req.method === 'GET') return send(res, 200, '{"status":"ok"}');
  fail(res, 404, 40402, 'No such resource.');
}

/** Runs `work`, answering 503 when the database cannot be used and 500 on anything else. */
function guarded(res: ServerResponse, work: () => void): void {
  try {
    work();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && UNAVAILABLE.test(code)) {
      fail(res, 503, 50301, 'The database is unavailable.', { 'retry-after': '1' });
    } else {
      fail(res, 500, 50001, 'An unexpected error occurred.');
    }
  }
}

const server = createServer((req, res) => guarded(res, () => handle(req, res)));
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  if (address !== null && typeof address === 'object') {
    process.stdout.write(`http://127.0.0.1:${address.port}\n`);
  }
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => server.close(() => db.close()));
}
