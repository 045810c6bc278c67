// Writes the TypeScript client's generated files (see client-codegen.ts) from the served
// OpenAPI document: `npm run client` after changing the API (`npm run openapi` runs it too).
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildOpenApiDocument } from '../src/api/openapi.js';
import { generateClientSources } from './client-codegen.js';

const root = new URL('../', import.meta.url);
for (const [path, text] of Object.entries(await generateClientSources(buildOpenApiDocument()))) {
  const file = fileURLToPath(new URL(path, root));
  writeFileSync(file, text);
  process.stdout.write(`wrote ${file}\n`);
}
