// Writes the served OpenAPI document to openapi.json at the repository root, in the
// format test/http/openapi.test.ts compares against: `npm run openapi` after changing the API.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildOpenApiDocument } from '../src/api/openapi.js';

const file = fileURLToPath(new URL('../openapi.json', import.meta.url));
writeFileSync(file, `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`);
process.stdout.write(`wrote ${file}\n`);
