import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { makeTempDir } from '../helpers/temp-dir.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CONFIG = join(ROOT, '.dependency-cruiser.mjs');
const DEPCRUISE = join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
/** What `npm run lint:layers` gives depcruise, the config made absolute. */
const LAYERS_ARGUMENTS = (() => {
  const scripts = (
    JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    }
  ).scripts;
  const args = scripts['lint:layers']!.split(' ');
  assert.equal(args.shift(), 'depcruise');
  return args.map((arg) => (arg === '.dependency-cruiser.mjs' ? CONFIG : arg));
})();

/**
 * A src/ of two-line files: each `bad-*` file breaks one rule (the rule is its expected
 * violation), every other import is one the layers allow and must pass.
 */
const FIXTURE: Record<string, string> = {
  'core/plant.ts': 'export const plant = 1;',
  'core/address.ts': "import { isIP } from 'node:net';\nexport const ip = isIP;",
  'core/bad-layer.ts': "import type { Store } from '../store/store.js';\nexport type S = Store;",
  'core/bad-io.ts': "import { readFileSync } from 'node:fs';\nexport const read = readFileSync;",
  'api/operations.ts': "import { plant } from '../core/plant.js';\nexport const op = plant;",
  'api/bad-layer.ts': "import { plants } from '../service/plants.js';\nexport const p = plants;",
  'api/bad-fastify.ts':
    "import type { FastifyInstance } from 'fastify';\nexport type F = FastifyInstance;",
  'store/store.ts':
    "import { plant } from '../core/plant.js';\nexport interface Store { p: typeof plant }",
  'store/sqlite.ts': "import type { Store } from './store.js';\nexport const sqlite = {} as Store;",
  'store/bad-layer.ts': "import { plants } from '../service/plants.js';\nexport const p = plants;",
  'outbound/sender.ts': "import { plant } from '../core/plant.js';\nexport const sender = plant;",
  'outbound/bad-layer.ts':
    "import type { Store } from '../store/store.js';\nexport type S = Store;",
  'service/plants.ts':
    "import type { Store } from '../store/store.js';\nexport const plants = {} as Store;",
  'service/bad-store.ts': "import { sqlite } from '../store/sqlite.js';\nexport const s = sqlite;",
  'service/bad-http.ts':
    "import { STATUS_CODES } from 'node:http';\nexport const codes = STATUS_CODES;",
  'service/bad-cycle-a.ts': "import { b } from './bad-cycle-b.js';\nexport const a = () => b;",
  'service/bad-cycle-b.ts': "import { a } from './bad-cycle-a.js';\nexport const b = () => a;",
  'http/app.ts':
    "import type { Store } from '../store/store.js';\nimport { plants } from '../service/plants.js';\n" +
    "import { op } from '../api/operations.js';\nexport const app = [plants, op] as unknown as Store;",
  'http/bad-value.ts': "import * as store from '../store/store.js';\nexport const s = store;",
  'http/bad-store.ts': "import { sqlite } from '../store/sqlite.js';\nexport const s = sqlite;",
  'server/serve.ts':
    "import { app } from '../http/app.js';\nimport { sender } from '../outbound/sender.js';\n" +
    "import { sqlite } from '../store/sqlite.js';\nexport const serve = [app, sender, sqlite];",
  'server/bad-cli.ts': "import { main } from '../cli/main.js';\nexport const m = main;",
  'server/bad-client.ts': "import { client } from '@plantstore/client';\nexport const c = client;",
  'cli/main.ts':
    "import { serve } from '../server/serve.js';\nimport { client } from '@plantstore/client';\n" +
    'export const main = [serve, client];',
  'cli/bad-app.ts': "import { app } from '../http/app.js';\nexport const a = app;",
  'cli/bad-client-path.ts':
    "import { client } from '../../packages/client/src/index.js';\nexport const c = client;",
  // A room nobody has written rules for yet still may not start the server.
  'jobs/bad-server.ts': "import { serve } from '../server/serve.js';\nexport const s = serve;",
};

/**
 * The client's package beside src/, linked as npm links a workspace, and the one package it
 * may use. Its `bad-*` files break its rule as those of src/ do.
 */
const PACKAGE_FIXTURE: Record<string, string> = {
  'package.json': JSON.stringify({ name: 'fixture', workspaces: ['packages/client'] }),
  'packages/client/package.json': JSON.stringify({
    name: '@plantstore/client',
    type: 'module',
    // As packages/client/package.json: depcruise's resolver reads `main`, not `exports`.
    main: './dist/index.js',
  }),
  'packages/client/dist/index.js': 'export const client = 1;',
  'packages/client/src/index.ts':
    "import { parse } from 'lossless-json';\nimport { other } from './other.js';\n" +
    'export const client = [parse, other];',
  'packages/client/src/other.ts': 'export const other = 1;',
  'packages/client/src/bad-server.ts':
    "import { plant } from '../../../src/core/plant.js';\nexport const p = plant;",
  'packages/client/src/bad-node.ts':
    "import { readFileSync } from 'node:fs';\nexport const read = readFileSync;",
  'node_modules/lossless-json/package.json': JSON.stringify({
    name: 'lossless-json',
    type: 'module',
    exports: './index.js',
  }),
  'node_modules/lossless-json/index.js': 'export const parse = 1;',
  // The benchmark uses the product's code as any client would; a cycle of its own is refused.
  'bench/run.ts':
    "import { plant } from '../src/core/plant.js';\nimport { a } from './phases/bad-cycle-a.js';\n" +
    'export const run = [plant, a];',
  'bench/phases/bad-cycle-a.ts': "import { b } from './bad-cycle-b.js';\nexport const a = () => b;",
  'bench/phases/bad-cycle-b.ts': "import { a } from './bad-cycle-a.js';\nexport const b = () => a;",
};

const EXPECTED = [
  'core-is-the-domain src/core/bad-layer.ts',
  'core-does-no-io src/core/bad-io.ts',
  'api-is-the-contract src/api/bad-layer.ts',
  'api-without-fastify src/api/bad-fastify.ts',
  'store-over-core-only src/store/bad-layer.ts',
  'outbound-over-core-only src/outbound/bad-layer.ts',
  'service-over-store-interface src/service/bad-store.ts',
  'service-knows-no-http src/service/bad-http.ts',
  'no-cycles src/service/bad-cycle-*.ts',
  'no-cycles bench/phases/bad-cycle-*.ts',
  'http-types-only-from-store src/http/bad-value.ts',
  'http-over-service src/http/bad-store.ts',
  'nothing-imports-the-cli src/server/bad-cli.ts',
  'only-cli-uses-the-client src/server/bad-client.ts',
  'cli-reaches-the-app-through-server src/cli/bad-app.ts',
  'client-by-its-package-name src/cli/bad-client-path.ts',
  'client-is-standalone packages/client/src/bad-server.ts',
  'client-is-standalone packages/client/src/bad-node.ts',
  'only-cli-starts-the-server src/jobs/bad-server.ts',
].sort();

interface Outcome {
  code: number;
  violations: string[];
}

/** Runs `npm run lint:layers`'s command on the fixture, as lint runs it on the real tree. */
async function cruiseFixture(dir: string): Promise<Outcome> {
  for (const [file, text] of Object.entries(FIXTURE)) {
    const path = join(dir, 'src', file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, `${text}\n`);
  }
  for (const [file, text] of Object.entries(PACKAGE_FIXTURE)) {
    const path = join(dir, file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, `${text}\n`);
  }
  mkdirSync(join(dir, 'node_modules/@plantstore'));
  symlinkSync('../../packages/client', join(dir, 'node_modules/@plantstore/client'));
  const run = promisify(execFile)(process.execPath, [DEPCRUISE, ...LAYERS_ARGUMENTS], {
    cwd: dir,
  });
  const { stdout, code } = await run.then(
    (done) => ({ stdout: done.stdout, code: 0 }),
    (failed: { stdout: string; code: number }) => failed,
  );
  // "  error core-is-the-domain: src/core/bad-layer.ts → src/store/store.ts", styled.
  // eslint-disable-next-line no-control-regex
  const plain = stdout.replace(/\x1b\[[0-9;]*m/g, '');
  const violations = [...plain.matchAll(/^\s*error (\S+): (\S+)/gm)].map(([, rule, from]) =>
    // A cycle is reported once, from whichever of its files the cruise met first.
    `${rule} ${from}`.replace(/bad-cycle-[ab]/, 'bad-cycle-*'),
  );
  return { code, violations: [...new Set(violations)].sort() };
}

test('the layer rules refuse each kind of violation, and only those', async (t) => {
  const { code, violations } = await cruiseFixture(makeTempDir(t));
  assert.deepEqual(violations, EXPECTED);
  // What makes `npm run lint` fail.
  assert.notEqual(code, 0);
});
