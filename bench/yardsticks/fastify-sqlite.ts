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
import Fastify from 'fastify';
import {
  type Answer,
  BAD_JSON,
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
if (args.db === undefined) throw new Error('fastify-sqlite: --db FILE is required');
const sqlite = openSqlite(args.db);
const { db, grants } = sqlite;
const tokens = new TokenCheck(grants, (t) => createHash('sha256').update(t).digest('hex'));

const app = Fastify({ logger: false, bodyLimit: MAX_BODY });

plantRoutes(app, sqlite, (req, scope) => tokens.refusal(req.headers.authorization, scope));

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
