/**
 * The minimal Fastify yardstick: a Fastify 5 app serving the same four operations as
 * plantstore over the same SQLite database (bench/yardsticks/sqlite.ts), with none of
 * plantstore's features: no schemas, no hooks, no plugins, no log; the token checked in
 * memory, prepared statements, the answers written by hand. plantstore ÷ this is what
 * plantstore's features cost; this ÷ the bare node:http yardstick is what Fastify costs.
 *
 *   node --import tsx bench/yardsticks/fastify-sqlite.ts --db FILE [--port N]
 */
import { createHash } from 'node:crypto';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import {
  type Answer,
  BAD_ID,
  BAD_JSON,
  BAD_PLANT,
  BAD_QUERY,
  createdAnswer,
  DELETED,
  HEALTHY,
  INTERNAL,
  MAX_BODY,
  MEDIA_TYPE,
  NOT_FOUND,
  noPlant,
  pageAnswer,
  parseInt64,
  parseListQuery,
  plantAnswer,
  TOO_LARGE,
  TokenCheck,
  UNAVAILABLE,
  UNAVAILABLE_CODE,
  validPlant,
} from './common.js';
import { yardstickArgs } from './node-http.js';
import { openSqlite } from './sqlite.js';

const args = yardstickArgs();
if (args.db === undefined) throw new Error('fastify-sqlite: --db FILE is required');
const { db, statements: sql, page: pageOf, create: createPlant, grants } = openSqlite(args.db);
const tokens = new TokenCheck(grants, (t) => createHash('sha256').update(t).digest('hex'));

const app = Fastify({ logger: false, bodyLimit: MAX_BODY });

function send(reply: FastifyReply, answer: Answer): FastifyReply {
  reply.code(answer.status).headers(answer.headers);
  return answer.body === undefined ? reply.send() : reply.send(answer.body);
}

/** The token check, then `work` with the id, answering 503/500 when the database fails. */
function withPlant(scope: string, work: (id: bigint) => Answer) {
  return (req: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const refusal = tokens.refusal(req.headers.authorization, scope);
    if (refusal !== undefined) return send(reply, refusal);
    const id = parseInt64(req.params.id);
    return send(reply, id === undefined ? BAD_ID : guarded(() => work(id)));
  };
}

function guarded(work: () => Answer): Answer {
  try {
    return work();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' && UNAVAILABLE_CODE.test(code) ? UNAVAILABLE : INTERNAL;
  }
}

app.get(
  '/plants/:id',
  withPlant('plants:read', (id) => {
    const row = sql.getOne.get(id);
    return row === undefined ? noPlant(id) : plantAnswer(row);
  }),
);

app.delete(
  '/plants/:id',
  withPlant('plants:write', (id) => (sql.remove.run(id).changes === 0 ? noPlant(id) : DELETED)),
);

app.get('/plants', (req, reply) => {
  const refusal = tokens.refusal(req.headers.authorization, 'plants:read');
  if (refusal !== undefined) return send(reply, refusal);
  const q = req.url.indexOf('?');
  const page = parseListQuery(q === -1 ? '' : req.url.slice(q + 1));
  if (page === undefined) return send(reply, BAD_QUERY);
  return send(
    reply,
    guarded(() => pageAnswer(pageOf(page), page.limit, page.tag)),
  );
});

app.post('/plants', (req, reply) => {
  const refusal = tokens.refusal(req.headers.authorization, 'plants:write');
  if (refusal !== undefined) return send(reply, refusal);
  const body = req.body;
  if (!validPlant(body)) return send(reply, BAD_PLANT);
  return send(
    reply,
    guarded(() => createdAnswer(createPlant(body.name, body.tag ?? null))),
  );
});

app.get('/healthz', (_req, reply) => send(reply, HEALTHY));

app.setNotFoundHandler((_req, reply) => send(reply, NOT_FOUND));
// Fastify's own refusals (body parsing, media type, size) in plantstore's Error body.
app.setErrorHandler((error: { statusCode?: number }, _req, reply) => {
  const byStatus: Record<number, Answer> = { 400: BAD_JSON, 413: TOO_LARGE, 415: MEDIA_TYPE };
  return send(reply, byStatus[error.statusCode ?? 500] ?? INTERNAL);
});

const address = await app.listen({ host: '127.0.0.1', port: args.port });
process.stdout.write(`${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void app.close().then(() => db.close()));
}
