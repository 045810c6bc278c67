import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { delimiter, join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { cli, ROOT, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/temp-dir.js';

// @plantstore/client as a user gets it: packed from the workspace, installed from the
// tarball into a project of its own (outside this checkout, with nothing but `node` on the
// PATH, so nothing can compile), docs/client.md's example type-checked with `tsc --strict`
// and run against a real `plantstore serve`. bin/plantstore and the package run dist/:
// `npm run build` first (npm test's pretest does).

const PACKAGE = join(ROOT, 'packages/client');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare'];

/** npm's own script: the one running `npm test`, else the `npm` on the PATH. */
function npmCli(): string {
  if (process.env.npm_execpath?.endsWith('.js')) return process.env.npm_execpath;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && existsSync(join(dir, 'npm'))) return realpathSync(join(dir, 'npm'));
  }
  throw new Error('npm is not on the PATH');
}

/**
 * The environment of a user's shell: this one without what `npm test` adds for its scripts
 * (npm_config_local_prefix and the like would point npm at this checkout), keeping the
 * settings that say how to reach the registry.
 */
function userEnv(path: string): NodeJS.ProcessEnv {
  const keep =
    /^npm_config_(registry|cache|userconfig|globalconfig|cafile|ca|proxy|https_proxy|noproxy|strict_ssl)$/;
  return {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !name.startsWith('npm_') || keep.test(name)),
    ),
    PATH: path,
  };
}

interface Ran {
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a node script to completion; its output and how long it took. */
function node(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<Ran> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      args,
      { ...options, maxBuffer: 16 * 1024 * 1024, timeout: 120_000 },
      (error, stdout, stderr) => {
        if (error)
          reject(new Error(`node ${args.join(' ')}: ${error.message}\n${stdout}${stderr}`));
        else resolve({ stdout, stderr, ms: Date.now() - started });
      },
    );
  });
}

/** The ```ts block under `## An example` in docs/client.md, calling `url`. */
function documentedExample(url: string): string {
  const text = readFileSync(join(ROOT, 'docs/client.md'), 'utf8');
  const section = text.slice(text.indexOf('\n## An example\n'));
  const block = /```ts\n([\s\S]*?)```/.exec(section);
  assert.ok(block, 'docs/client.md has a ts block under "## An example"');
  const example = block[1]!.replaceAll('http://127.0.0.1:8080', url);
  assert.notEqual(example, block[1], 'the example calls http://127.0.0.1:8080');
  return example;
}

/** The arguments of docs/client.md's `npx tsc ... plants.ts && node plants.js`. */
function documentedTscArguments(): string[] {
  const text = readFileSync(join(ROOT, 'docs/client.md'), 'utf8');
  const command = /^npx tsc (.*plants\.ts) && node plants\.js$/m.exec(text);
  assert.ok(command, 'docs/client.md compiles plants.ts with npx tsc');
  const args = command[1]!.split(' ');
  assert.ok(args.includes('--strict'));
  return args;
}

/** What the example prints, as docs/client.md says. */
const EXAMPLE_OUTPUT = [
  '9007199254740993n',
  '9007199254740993n Big fern',
  '404 40401 No plant has id 9007199254740993.',
  '',
].join('\n');

/** Compiled with the example: the types are the API's, not `any`. */
const TYPE_CHECKS = `import {
  createClient,
  PlantstoreError,
  type components,
  type Plant,
} from '@plantstore/client';

export async function typeChecks(): Promise<string> {
  const client = createClient({ baseUrl: 'http://127.0.0.1:8080' });
  const plant: Plant = await client.plants.get(1n);
  const id: bigint = plant.id;
  // @ts-expect-error an id is a bigint, never a number
  await client.plants.create({ id: 1, name: 'number' });
  const { data, headers } = await client.request('get', '/plants/{id}', { params: { id } });
  const name: string = data.name;
  // @ts-expect-error no such operation in the document
  await client.request('get', '/plantz');
  const code: components['schemas']['Error']['error'] | undefined = new PlantstoreError(
    404,
    undefined,
    new Headers(),
    Date.now(),
  ).code;
  return \`\${name} \${headers.get('etag')} \${code}\`;
}
`;

/** The project a user makes: package.json, a PATH of `node` alone, the tarball installed. */
async function installTarball(t: TestContext, tarball: string) {
  const project = makeTempDir(t);
  assert.ok(!realpathSync(project).startsWith(ROOT), 'the project is outside the checkout');
  writeFileSync(
    join(project, 'package.json'),
    `${JSON.stringify({ name: 'plants-demo', private: true, type: 'module' })}\n`,
  );
  const bin = join(project, '.bin');
  mkdirSync(bin);
  symlinkSync(process.execPath, join(bin, 'node'));
  const install = await node(
    [npmCli(), 'install', '--no-audit', '--no-fund', '--loglevel', 'http', tarball],
    { cwd: project, env: userEnv(bin) },
  );
  return { project, install, env: userEnv(bin) };
}

test('@plantstore/client: packed, installed alone from its tarball, typed and run', async (t) => {
  const started = Date.now();
  const built = join(PACKAGE, 'dist/index.js');
  assert.ok(existsSync(built), `${built} is missing: npm run build first`);

  // --ignore-scripts: its prepack would build dist/ again under the suites running beside
  // this one; the build just made it (and `npm run build` is what prepack runs).
  const packDir = makeTempDir(t);
  const pack = await node(
    [npmCli(), 'pack', '-w', '@plantstore/client', '--ignore-scripts', '--json'].concat([
      '--pack-destination',
      packDir,
    ]),
    { cwd: ROOT, env: userEnv(process.env.PATH ?? '') },
  );
  const [packed] = JSON.parse(pack.stdout) as [
    { filename: string; size: number; files: { path: string }[] },
  ];
  const files = packed.files.map((file) => file.path).sort();
  assert.ok(files.includes('dist/index.js') && files.includes('dist/index.d.ts'));
  assert.ok(files.includes('dist/schema.d.ts'), 'the generated types ship');
  assert.deepEqual(
    files.filter((file) => !/^dist\/[\w-]+\.(js|d\.ts)$/.test(file)),
    ['README.md', 'package.json'],
    'the tarball holds the built JavaScript and its types, no source',
  );
  for (const file of files.filter((file) => file.endsWith('.d.ts'))) {
    assert.doesNotMatch(
      readFileSync(join(PACKAGE, file), 'utf8'),
      /reference types=/,
      `${file} needs no @types package of its own`,
    );
  }
  t.diagnostic(`packed ${packed.filename}: ${packed.size} bytes in ${pack.ms} ms`);

  const { project, install, env } = await installTarball(t, join(packDir, packed.filename));
  t.diagnostic(`installed in ${install.ms} ms, with only node on the PATH`);
  assert.ok(install.ms < 60_000, `npm install took ${install.ms} ms`);

  const lock = JSON.parse(readFileSync(join(project, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { hasInstallScript?: boolean; dependencies?: object }>;
  };
  const installed = Object.keys(lock.packages).filter((path) => path !== '');
  assert.deepEqual(installed.sort(), [
    'node_modules/@plantstore/client',
    'node_modules/lossless-json',
  ]);
  for (const path of installed) {
    assert.equal(lock.packages[path]!.hasInstallScript, undefined, `${path} has install scripts`);
  }
  const manifest = JSON.parse(
    readFileSync(join(project, 'node_modules/@plantstore/client/package.json'), 'utf8'),
  ) as Record<string, Record<string, string> | undefined>;
  assert.deepEqual(Object.keys(manifest.dependencies ?? {}), ['lossless-json']);
  for (const field of ['peerDependencies', 'optionalDependencies', 'bundleDependencies']) {
    assert.equal(manifest[field], undefined, field);
  }
  for (const script of INSTALL_SCRIPTS) assert.equal(manifest.scripts?.[script], undefined, script);
  // What npm fetched over the network, not from its cache: lossless-json at most.
  const fetched = [...install.stderr.matchAll(/^npm http fetch \w+ \d+ (\S+)/gm)].map((m) => m[1]!);
  assert.deepEqual(
    fetched.filter((url) => !/\/lossless-json(\/|$)/.test(url)),
    [],
    'npm fetched nothing but lossless-json',
  );

  // As `npm install --save-dev typescript @types/node` would have it: the checkout's own
  // copies, so that this needs no registry.
  mkdirSync(join(project, 'node_modules/@types'));
  symlinkSync(join(ROOT, 'node_modules/@types/node'), join(project, 'node_modules/@types/node'));

  const db = join(makeTempDir(t), 'plants.db');
  const server = await startServer(t, ['--db', db]);
  const token = (await cli(['token', 'create', '--db', db])).stdout.trim();
  const example = documentedExample(server.url);
  writeFileSync(join(project, 'plants.mjs'), example);
  writeFileSync(join(project, 'plants.ts'), example);
  writeFileSync(join(project, 'type-checks.ts'), TYPE_CHECKS);

  // docs/client.md's command, with the type checks beside the example.
  const tsc = await node([TSC, ...documentedTscArguments(), 'type-checks.ts'], {
    cwd: project,
    env,
  });
  t.diagnostic(`tsc --strict in ${tsc.ms} ms`);
  assert.ok(readdirSync(project).includes('plants.js'));

  for (const program of ['plants.mjs', 'plants.js']) {
    const run = await node([program], { cwd: project, env: { ...env, TOKEN: token } });
    assert.equal(run.stdout, EXAMPLE_OUTPUT, `node ${program}`);
    assert.equal(run.stderr, '');
  }
  t.diagnostic(`all in ${Date.now() - started} ms`);
});
