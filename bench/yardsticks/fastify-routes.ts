/**
 * The four plant routes of both Fastify yardsticks (fastify-sqlite.ts, fastify-plugins.ts)
 * over the SQLite of sqlite.ts, with plantstore's answers; each yardstick says how a request's
 * token is checked (`refusal`), so that the two differ only in what surrounds the routes.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  type Answer,
  BAD_ID,
  BAD_PLANT,
  BAD_QUERY,
  createdAnswer,
  DELETED,
  noPlant,
  pageAnswer,
  parseInt64,
  parseListQuery,
  plantAnswer,
  validPlant,
  guarded,
} from './common.js';
import type { openSqlite } from './sqlite.js';

/** Why the request may not run an operation that needs `scope`; undefined when it may. */
export type Refusal = (req: FastifyRequest, scope: string) => Answer | undefined;

export function send(reply: FastifyReply, answer: Answer): FastifyReply {
  reply.code(answer.status).headers(answer.headers);
  return answer.body === undefined ? reply.send() : reply.send(answer.body);
}

export function plantRoutes(
  app: FastifyInstance,
  { statements: sql, page: pageOf, create }: ReturnType<typeof openSqlite>,
  refusal: Refusal,
): void {
  /** The token check, then `work` with the id. */
  const withPlant =
    (scope: string, work: (id: bigint) => Answer) =>
    (req: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
      const refused = refusal(req, scope);
      if (refused !== undefined) return send(reply, refused);
      const id = parseInt64(req.params.id);
      return send(reply, id === undefined ? BAD_ID : guarded(() => work(id)));
    };

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
    const refused = refusal(req, 'plants:read');
    if (refused !== undefined) return send(reply, refused);
    const q = req.url.indexOf('?');
    const page = parseListQuery(q === -1 ? '' : req.url.slice(q + 1));
    if (page === undefined) return send(reply, BAD_QUERY);
    return send(
      reply,
      guarded(() => pageAnswer(pageOf(page), page.limit, page.tag)),
    );
  });

  app.post('/plants', (req, reply) => {
    const refused = refusal(req, 'plants:write');
    if (refused !== undefined) return send(reply, refused);
    const body = req.body;
    if (!validPlant(body)) return send(reply, BAD_PLANT);
    return send(
      reply,
      guarded(() => createdAnswer(create(body.name, body.tag ?? null))),
    );
  });
}
