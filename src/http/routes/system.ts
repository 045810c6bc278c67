import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../core/errors.js';
import { buildOpenApiDocument } from '../../api/openapi.js';
import {
  getDocs,
  getDocsAsset,
  getDocsSlash,
  getHealth,
  getOpenApi,
  getReadiness,
  getRoot,
} from '../../api/operations.js';
import { docsAssets, docsPage } from './docs-page.js';
import { withFinalNewline } from '../hooks/json-newline.js';
import { route } from './route.js';

/** How long /readyz waits for the database before calling it unavailable. */
export const READINESS_TIMEOUT_MS = 2_000;

// Resolved, not loaded: the UI package's entry point evaluates the whole multi-megabyte
// bundle, which cost every start ~170 ms and ~28 MB of RSS (measured: ready 520 -> 345 ms).
const resolveAsset = createRequire(import.meta.url).resolve;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function systemRoutes(app: FastifyInstance, ready: () => Promise<void>): void {
  // One Buffer, its final newline in it, sent to every client: a string would be copied for
  // each answer the kernel does not take at once, so clients pipelining requests for it and
  // never reading held a copy each (192 KB) until the send timeout; a Buffer is shared.
  const document = Buffer.from(withFinalNewline(JSON.stringify(buildOpenApiDocument())));
  const loaded = new Map<string, Buffer>();

  route(app, getHealth, async () => ({ status: 'ok' as const }));

  route(app, getReadiness, async (request) => {
    try {
      await withTimeout(ready(), READINESS_TIMEOUT_MS);
    } catch (error) {
      request.log.warn({ err: error }, 'database not ready');
      throw new ApiError('storeUnavailable');
    }
    return { status: 'ok' as const };
  });

  route(app, getOpenApi, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(document),
  );

  route(app, getDocs, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').send(docsPage),
  );

  route(app, getRoot, async (_request, reply) => reply.redirect(getDocs.path, 302));

  route(app, getDocsSlash, async (_request, reply) => reply.redirect(getDocs.path, 308));

  route(app, getDocsAsset, async (request, reply) => {
    const { file } = request.params;
    const asset = Object.hasOwn(docsAssets, file) ? docsAssets[file] : undefined;
    if (asset === undefined) throw new ApiError('routeNotFound', `No resource at /docs/${file}.`);
    let content = loaded.get(file);
    if (content === undefined) {
      content = await readFile(resolveAsset(asset.from));
      loaded.set(file, content);
    }
    return reply.type(asset.type).header('cache-control', 'public, max-age=3600').send(content);
  });
}
