/**
 * The Fastify-plugins yardstick (issue 22, item 5b): the minimal Fastify app of
 * fastify-sqlite.ts (same routes, same SQLite data, same answers), given plantstore's
 * features the way a user of the ecosystem would, from Fastify's own logger and plugins, each
 * registered plainly:
 * - Fastify's request log (pino, level info) on standard output, which the bench sends to
 *   /dev/null as it does plantstore's;
 * - `@fastify/bearer-auth` with an `auth` function over the token table's hashes (the
 *   usable tokens read once at start, a token seen once then known by itself), the scope
 *   checked by the route;
 * - `@fastify/rate-limit` per token at plantstore's default, 100,000 a minute: the bench's
 *   load spreads over 64 tokens, so none reaches it;
 * - `@fastify/etag`, `@fastify/helmet` with its defaults, and `@fastify/cors` open to any
 *   origin, with the methods and headers of this API.
 * plantstore ÷ this is how far plantstore stays ahead of an app assembled from the plugins.
 *
 *   node --import tsx bench/yardsticks/fastify-plugins.ts --db FILE [--port N]
 */
import { createHash } from 'node:crypto';
import bearerAuth from '@fastify/bearer-auth';
import cors from '@fastify/cors';
import etag from '@fastify/etag';
import helmet from '@fastify/helmet';
import rateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import {
  type Answer,
  BAD_ID,
  BAD_JSON,
  BAD_PLANT,
  BAD_QUERY,
  createdAnswer,
  DELETED,
  failure,
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
  UNAVAILABLE,
  UNAVAILABLE_CODE,
  validPlant,
} from './common.js';
import { yardstickArgs } from './node-http.js';
import { openSqlite } from './sqlite.js';

const args = yardstickArgs();
if (args.db === undefined) throw new Error('fastify-plugins: --db FILE is required');
const { db, statements: sql, page: pageOf, create: createPlant, grants } = openSqlite(args.db);

/** The usable tokens' scopes by hash, and by token once a token has been seen. */
const scopesByHash = new Map(grants.map((g) => [g.hash, g.scopes.split(' ')]));
const known = new Map<string, string[]>();
function scopesOf(token: string): string[] | undefined {
  let scopes = known.get(token);
  if (scopes === undefined) {
    scopes = scopesByHash.get(createHash('sha256').update(token).digest('hex'));
    if (scopes !== undefined) known.set(token, scopes);
  }
  return scopes;
}

const RATE_LIMITED = failure(
  429,
  42901,
  'The access token has used up its rate limit; see Retry-After.',
);

const app = Fastify({ logger: true, bodyLimit: MAX_BODY });

function send(reply: FastifyReply, answer: Answer): FastifyReply {
  reply.code(answer.status).headers(answer.headers);
  return answer.body === undefined ? reply.send() : reply.send(answer.body);
}

function guarded(work: () => Answer): Answer {
  try {
    return work();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' && UNAVAILABLE_CODE.test(code) ? UNAVAILABLE : INTERNAL;
  }
}

/** The 403 when the request's token (bearer-auth let it in) lacks `scope`. */
function lacking(req: FastifyRequest, scope: string): Answer | undefined {
  if (req.getDecorator<string[]>('scopes').includes(scope)) return undefined;
  return failure(403, 40301, `This operation needs the scope "${scope}".`);
}

/** The scope check, then `work` with the id, answering 503/500 when the database fails. */
function withPlant(scope: string, work: (id: bigint) => Answer) {
  return (req: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const refusal = lacking(req, scope);
    if (refusal !== undefined) return send(reply, refusal);
    const id = parseInt64(req.params.id);
    return send(reply, id === undefined ? BAD_ID : guarded(() => work(id)));
  };
}

// Before the API's context is registered, which takes them from here.
app.setNotFoundHandler((_req, reply) => send(reply, NOT_FOUND));
// Fastify's and the plugins' refusals (body parsing, media type, size, rate limit) in
// plantstore's Error body.
app.setErrorHandler((error: { statusCode?: number }, _req, reply) => {
  const byStatus: Record<number, Answer> = {
    400: BAD_JSON,
    413: TOO_LARGE,
    415: MEDIA_TYPE,
    429: RATE_LIMITED,
  };
  return send(reply, byStatus[error.statusCode ?? 500] ?? INTERNAL);
});

await app.register(helmet);
await app.register(cors, {
  origin: '*',
  methods: ['GET', 'POST', 'DELETE'],
  allowedHeaders: ['Authorization', 'Content-Type'],
  exposedHeaders: ['ETag', 'Link', 'Location', 'Retry-After'],
  maxAge: 600,
});
await app.register(etag);

app.get('/healthz', (_req, reply) => send(reply, HEALTHY));

// The API in a context of its own, so that /healthz needs no token.
await app.register(async (api) => {
  api.decorateRequest('scopes', null);
  await api.register(bearerAuth, {
    keys: new Set<string>(),
    auth: (token, req) => {
      const scopes = scopesOf(token);
      if (scopes === undefined) return false;
      req.setDecorator('scopes', scopes);
      return true;
    },
    // plantstore's Error body; the plugin sends whatever this returns, though its type
    // asks for a string `error`.
    errorResponse: ((err: Error) =>
      err.message === 'missing authorization header'
        ? { error: 40102, message: 'Send the header "Authorization: Bearer <ACCESS_TOKEN>".' }
        : {
            error: 40101,
            message: 'The access token is unknown, revoked or expired.',
          }) as unknown as (err: Error) => { error: string },
  });
  // Route hooks run after bearer-auth's: only known tokens are counted, each on its own.
  await api.register(rateLimit, {
    max: 100_000,
    timeWindow: '1 minute',
    keyGenerator: (req) => req.headers.authorization ?? req.ip,
  });

  api.get(
    '/plants/:id',
    withPlant('plants:read', (id) => {
      const row = sql.getOne.get(id);
      return row === undefined ? noPlant(id) : plantAnswer(row);
    }),
  );

  api.delete(
    '/plants/:id',
    withPlant('plants:write', (id) => (sql.remove.run(id).changes === 0 ? noPlant(id) : DELETED)),
  );

  api.get('/plants', (req, reply) => {
    const refusal = lacking(req, 'plants:read');
    if (refusal !== undefined) return send(reply, refusal);
    const q = req.url.indexOf('?');
    const page = parseListQuery(q === -1 ? '' : req.url.slice(q + 1));
    if (page === undefined) return send(reply, BAD_QUERY);
    return send(
      reply,
      guarded(() => pageAnswer(pageOf(page), page.limit, page.tag)),
    );
  });

  api.post('/plants', (req, reply) => {
    const refusal = lacking(req, 'plants:write');
    if (refusal !== undefined) return send(reply, refusal);
    const body = req.body;
    if (!validPlant(body)) return send(reply, BAD_PLANT);
    return send(
      reply,
      guarded(() => createdAnswer(createPlant(body.name, body.tag ?? null))),
    );
  });
});

const address = await app.listen({ host: '127.0.0.1', port: args.port });
process.stdout.write(`${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void app.close().then(() => db.close()));
}
