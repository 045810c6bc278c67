/**
 * The node:http side of the bare yardsticks: routing by hand, body reading, writing an
 * Answer, listening and printing the URL.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';
import {
  type Answer,
  BAD_JSON,
  failure,
  HEALTHY,
  INTERNAL,
  MAX_BODY,
  NOT_FOUND,
  TOO_LARGE,
} from './common.js';

export function write(res: ServerResponse, answer: Answer): void {
  if (answer.body === undefined) {
    res.writeHead(answer.status, answer.headers).end();
    return;
  }
  res
    .writeHead(answer.status, {
      ...answer.headers,
      'content-length': Buffer.byteLength(answer.body),
    })
    .end(answer.body);
}

export const hasBody = (req: IncomingMessage): boolean =>
  req.headers['transfer-encoding'] !== undefined ||
  (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Reads a JSON body of at most MAX_BODY bytes; `done` gets the value or the 400/413 to send. */
export function readJson(req: IncomingMessage, done: (body: unknown, refusal?: Answer) => void) {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY) chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > MAX_BODY) return done(undefined, TOO_LARGE);
    try {
      done(JSON.parse(utf8.decode(Buffer.concat(chunks))));
    } catch {
      done(undefined, BAD_JSON);
    }
  });
}

/** The operations a yardstick serves, each given what the router took from the request. */
export interface Handlers {
  plant(req: IncomingMessage, res: ServerResponse, idText: string): void;
  list(req: IncomingMessage, res: ServerResponse, query: string): void;
  create(req: IncomingMessage, res: ServerResponse): void;
}

function route(handlers: Handlers, req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  if (path.startsWith('/plants/')) return handlers.plant(req, res, path.slice('/plants/'.length));
  if (path === '/plants') {
    if (req.method === 'GET') return handlers.list(req, res, q === -1 ? '' : url.slice(q + 1));
    if (req.method === 'POST') return handlers.create(req, res);
    return write(
      res,
      failure(405, 40501, 'The resource does not support this method.', { allow: 'GET, POST' }),
    );
  }
  if (path === '/healthz' && req.method === 'GET') {
    return write(res, HEALTHY);
  }
  write(res, NOT_FOUND);
}

/** The command line every yardstick takes: --db FILE or --database-url URL, and --port. */
export function yardstickArgs(): { db?: string; databaseUrl?: string; port: number } {
  const { values } = parseArgs({
    options: {
      db: { type: 'string' },
      'database-url': { type: 'string' },
      port: { type: 'string', default: '0' },
    },
  });
  return { db: values.db, databaseUrl: values['database-url'], port: Number(values.port) };
}

/** Listens on 127.0.0.1:port, prints the URL, and calls `close` on SIGTERM or SIGINT. */
export function listen(handlers: Handlers, port: number, close: () => void): void {
  const server = createServer((req, res) => {
    try {
      route(handlers, req, res);
    } catch (error) {
      process.stderr.write(`yardstick: ${String(error)}\n`);
      write(res, INTERNAL);
    }
  });
  server.listen(port, '127.0.0.1', () => {
    const address = server.address();
    if (address !== null && typeof address === 'object') {
      process.stdout.write(`http://127.0.0.1:${address.port}\n`);
    }
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => server.close(close));
  }
}
