/**
 * The Fastify-plugins yardstick: the minimal Fastify app of
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
import Fastify, { type FastifyRequest } from 'fastify';
import {
  type Answer,
  BAD_JSON,
  failure,
  HEALTHY,
  INTERNAL,
  MAX_BODY,
  MEDIA_TYPE,
  NOT_FOUND,
  TokenCheck,
  TOO_LARGE,
} from './common.js';
import { plantRoutes, send } from './fastify-routes.js';
import { yardstickArgs } from './node-http.js';
import { openSqlite } from './sqlite.js';

const args = yardstickArgs();
if (args.db === undefined) throw new Error('fastify-plugins: --db FILE is required');
const sqlite = openSqlite(args.db);
const { db, grants } = sqlite;

const tokens = new TokenCheck(grants, (t) => createHash('sha256').update(t).digest('hex'));

const RATE_LIMITED = failure(
  429,
  42901,
  'The access token has used up its rate limit; see Retry-After.',
);

const app = Fastify({ logger: true, bodyLimit: MAX_BODY });
// What the plugins answer as objects (bearer-auth's refusals) ends with a newline, as
// plantstore's bodies and the other answers here (common.ts) do.
app.setReplySerializer((payload) => `${JSON.stringify(payload)}\n`);

/** The 403 when the request's token (bearer-auth let it in) lacks `scope`. */
function lacking(req: FastifyRequest, scope: string): Answer | undefined {
  if (req.getDecorator<string[]>('scopes').includes(scope)) return undefined;
  return failure(403, 40301, `This operation needs the scope "${scope}".`);
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
      const scopes = tokens.scopesOf(token);
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

  plantRoutes(api, sqlite, lacking);
});

const address = await app.listen({ host: '127.0.0.1', port: args.port });
process.stdout.write(`${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void app.close().then(() => db.close()));
}
