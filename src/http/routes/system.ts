import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../core/errors.js';
import { buildOpenApiDocument } from '../../api/openapi.js';
import {
  getDocs,
  getDocsAsset,
  getHealth,
  getOpenApi,
  getReadiness,
} from '../../api/operations.js';
import { route } from './route.js';

/** How long /readyz waits for the database before calling it unavailable. */
export const READINESS_TIMEOUT_MS = 2_000;

// Resolved, not required: the package's entry point evaluates the whole multi-megabyte
// UI bundle, which cost every start ~170 ms and ~28 MB of RSS (measured: ready 520 -> 345 ms).
const swaggerUiDir = dirname(
  createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'),
);

const assets: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
};

const docsPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Plant Store API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#ui', deepLinking: true });
</script>
</body>
</html>
`;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function systemRoutes(app: FastifyInstance, ready: () => Promise<void>): void {
  const document = JSON.stringify(buildOpenApiDocument());
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

  route(app, getDocsAsset, async (request, reply) => {
    const { file } = request.params;
    const type = Object.hasOwn(assets, file) ? assets[file] : undefined;
    if (type === undefined) throw new ApiError('routeNotFound', `No resource at /docs/${file}.`);
    let content = loaded.get(file);
    if (content === undefined) {
      content = await readFile(join(swaggerUiDir, file));
      loaded.set(file, content);
    }
    return reply.type(type).header('cache-control', 'public, max-age=3600').send(content);
  });
}
