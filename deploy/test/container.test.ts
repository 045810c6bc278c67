import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test, type TestContext } from 'node:test';
import { makeTempDir } from '../../test/helpers/temp-dir.js';
import { ROOT } from '../../test/helpers/server-process.js';
import { cannotRun, check, freePort, run, skipUnless } from './tools.js';

// deploy/container/Containerfile, built and run with buildah (no registry, so no official
// Node image, is reachable here): on a base made from Debian's packages by mmdebstrap, the
// image is built, started on a volume, given a plant, started anew on the same volume, and
// the plant is read back. The first run on a machine builds the base (mmdebstrap, a few
// minutes); later runs reuse it and buildah's cached layers.

const CONTAINERFILE = join(ROOT, 'deploy/container/Containerfile');
const IGNOREFILE = join(ROOT, 'deploy/container/Containerfile.dockerignore');
const IMAGE = 'localhost/plantstore-test:latest';
/** Another base: PLANTSTORE_TEST_BASE=image (then it is used as it is, never rebuilt). */
const GIVEN_BASE = process.env.PLANTSTORE_TEST_BASE;
const BASE = GIVEN_BASE ?? 'localhost/plantstore-test-base:trixie';
/** The base is made anew once it is this old, for Debian's security updates. */
const BASE_MAX_AGE_MS = 7 * 86_400_000;
const ISOLATION = ['--isolation', 'chroot'];
/** The uid the image runs as (USER in the Containerfile). */
const IMAGE_UID = 10001;
const VOLUME = '/var/lib/plantstore';

function whyNot(): string | undefined {
  const missing = cannotRun('buildah', ['--version']);
  if (missing) return `${missing} (apt-get install buildah mmdebstrap)`;
  // buildah is there: can it make a container here (storage, privileges)?
  const scratch = cannotRun('buildah', ['from', '--name', 'plantstore-test-probe', 'scratch']);
  if (scratch) return `buildah cannot make a container: ${scratch}`;
  cannotRun('buildah', ['rm', 'plantstore-test-probe']);
  if (GIVEN_BASE === undefined) {
    const mmdebstrap = cannotRun('mmdebstrap', ['--version']);
    if (mmdebstrap) return `${mmdebstrap} (apt-get install mmdebstrap)`;
  }
  return undefined;
}

const skip = skipUnless('deploy/test/container.test.ts', whyNot());

const MINUTE = 60_000;

/** The Debian base the image is built on, made with mmdebstrap unless a fresh one exists. */
async function ensureBase(t: TestContext): Promise<void> {
  const existing = await run('buildah', ['inspect', '--type', 'image', BASE]);
  if (existing.code === 0) {
    const created = Date.parse(
      (JSON.parse(existing.stdout) as { Docker: { created: string } }).Docker.created,
    );
    if (GIVEN_BASE !== undefined || Date.now() - created < BASE_MAX_AGE_MS) {
      t.diagnostic(`base ${BASE}: made ${new Date(created).toISOString()}, reused`);
      return;
    }
  }
  assert.equal(GIVEN_BASE, undefined, `PLANTSTORE_TEST_BASE=${BASE} is not an image here`);
  const dir = makeTempDir(t);
  const tarball = join(dir, 'base.tar');
  const started = Date.now();
  await check(
    'mmdebstrap',
    ['--variant=apt', '--include=nodejs,npm,ca-certificates', 'trixie', tarball],
    { timeoutMs: 20 * MINUTE },
  );
  t.diagnostic(`mmdebstrap: ${Math.round((Date.now() - started) / 1000)} s`);
  const container = (await check('buildah', ['from', 'scratch'])).trim();
  try {
    await check('buildah', ['add', '--quiet', container, tarball, '/'], { timeoutMs: 10 * MINUTE });
    // Certificate authorities this machine adds to Debian's (a proxy's, say) are trusted
    // inside too, or npm could not reach the registry during the build.
    const local = '/usr/local/share/ca-certificates';
    let added: string[] = [];
    try {
      added = readdirSync(local).filter((name) => name.endsWith('.crt'));
    } catch {
      // None.
    }
    if (added.length > 0) {
      await check('buildah', ['copy', '--quiet', container, `${local}/`, `${local}/`]);
      await check('buildah', ['run', ...ISOLATION, container, '--', 'update-ca-certificates']);
    }
    await check('buildah', [
      'config',
      '--env',
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      container,
    ]);
    await check('buildah', ['commit', '--quiet', container, BASE], { timeoutMs: 10 * MINUTE });
  } finally {
    await run('buildah', ['rm', container]);
  }
  t.diagnostic(`base ${BASE} made in ${Math.round((Date.now() - started) / 1000)} s`);
}

interface ImageConfig {
  User: string;
  Entrypoint: string[];
  Cmd: string[];
  Volumes: Record<string, object>;
  ExposedPorts: Record<string, object>;
  Env: string[];
  Healthcheck?: { Test: string[] };
}

async function imageConfig(): Promise<ImageConfig> {
  const out = await check('buildah', ['inspect', '--type', 'image', IMAGE]);
  return (JSON.parse(out) as { Docker: { config: ImageConfig } }).Docker.config;
}

interface Running {
  url: string;
  /** The server's process on this machine (chroot isolation shares the PID namespace). */
  pid: number;
  lines: { msg?: string; pid?: number }[];
  exited: Promise<number | null>;
}

/** `buildah run` of the image's ENTRYPOINT and CMD in `container`, on the loopback. */
async function serve(
  t: TestContext,
  container: string,
  config: ImageConfig,
  volume: string,
): Promise<Running> {
  const port = await freePort();
  const child = spawn(
    'buildah',
    [
      'run',
      ...ISOLATION,
      // The image listens on 0.0.0.0 for container networks; here that is the host's.
      '--env',
      'HOST=127.0.0.1',
      '--env',
      `PORT=${port}`,
      '--volume',
      `${volume}:${VOLUME}`,
      container,
      '--',
      ...config.Entrypoint,
      ...config.Cmd,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let running = true;
  const exited = once(child, 'exit').then(([code]) => {
    running = false;
    return code as number | null;
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const lines: Running['lines'] = [];
  const listening = new Promise<Running>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (text) => {
      try {
        lines.push(JSON.parse(text) as Running['lines'][number]);
      } catch {
        lines.push({ msg: `(not JSON) ${text}` });
      }
      const line = lines.at(-1)!;
      const at = /^Server listening at (http:\/\/\S+)$/.exec(line.msg ?? '');
      if (at) resolve({ url: at[1]!, pid: line.pid!, lines, exited });
    });
    void exited.then((code) => reject(new Error(`the container exited ${code}: ${stderr}`)));
    setTimeout(() => reject(new Error(`not listening in 60 s: ${stderr}`)), MINUTE).unref();
  });
  t.after(async () => {
    if (!running) return;
    const { pid } = await listening.catch(() => ({ pid: undefined }));
    if (pid !== undefined && isServer(pid)) process.kill(pid, 'SIGKILL');
    child.kill('SIGKILL');
    await exited;
  });
  return listening;
}

/** Whether `pid` is a plantstore server on this machine (the log's pid is the host's). */
function isServer(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('serve');
  } catch {
    return false;
  }
}

/** SIGTERM to the server, as `docker stop` sends; resolves with how long it took. */
async function stop(server: Running): Promise<number> {
  assert.ok(isServer(server.pid), `pid ${server.pid} is the server`);
  const started = Date.now();
  process.kill(server.pid, 'SIGTERM');
  assert.equal(await server.exited, 0);
  assert.ok(server.lines.some((line) => line.msg === 'stopped'));
  return Date.now() - started;
}

/** Runs the image's HEALTHCHECK command inside `container`; its exit code. */
async function healthcheck(container: string, config: ImageConfig, url: string) {
  const [kind, ...command] = config.Healthcheck!.Test;
  assert.equal(kind, 'CMD');
  const ran = await run('buildah', [
    'run',
    ...ISOLATION,
    '--env',
    `PORT=${new URL(url).port}`,
    container,
    '--',
    ...command,
  ]);
  return ran.code;
}

async function newContainer(t: TestContext): Promise<string> {
  const container = (await check('buildah', ['from', IMAGE])).trim();
  t.after(() => run('buildah', ['rm', container]));
  return container;
}

test(
  'the image builds, serves, keeps its data in the volume, and checks its health',
  { skip, timeout: 45 * MINUTE },
  async (t) => {
    const seconds = (since: number) => `${Math.round((Date.now() - since) / 1000)} s`;
    await ensureBase(t);

    // The build: both stages, on the base.
    const building = Date.now();
    const log = join(makeTempDir(t), 'build.log');
    const built = await run(
      'buildah',
      [
        'bud',
        ...ISOLATION,
        '--layers',
        // No working containers left behind by a failed build.
        '--force-rm',
        // Docker's format: OCI images have no HEALTHCHECK.
        '--format',
        'docker',
        '--build-arg',
        `BASE=${BASE}`,
        '--ignorefile',
        IGNOREFILE,
        '--file',
        CONTAINERFILE,
        '--tag',
        IMAGE,
        ROOT,
      ],
      { timeoutMs: 30 * MINUTE },
    );
    writeFileSync(log, built.stdout + built.stderr);
    const tail = (built.stdout + built.stderr).split('\n').slice(-40).join('\n');
    assert.equal(built.code, 0, `buildah bud failed:\n${tail}`);
    t.diagnostic(`built ${IMAGE} in ${seconds(building)}`);

    // The image: non-root, a volume, a health check on /healthz, no compilers.
    const config = await imageConfig();
    assert.equal(config.User, `${IMAGE_UID}:${IMAGE_UID}`);
    assert.deepEqual(Object.keys(config.Volumes), [VOLUME]);
    assert.deepEqual(Object.keys(config.ExposedPorts), ['8080/tcp']);
    assert.ok(config.Healthcheck, 'HEALTHCHECK is kept (docker format)');
    assert.match(config.Healthcheck.Test.join(' '), /\/healthz/);
    assert.ok(config.Env.includes(`PLANTSTORE_DB=${VOLUME}/plantstore.db`), config.Env.join());
    const first = await newContainer(t);
    const probe = await check('buildah', [
      'run',
      ...ISOLATION,
      first,
      '--',
      'sh',
      '-c',
      'id -u; for tool in cc gcc g++ make; do command -v $tool; done; ' +
        'ls -d /app/node_modules/typescript 2>/dev/null; true',
    ]);
    // Only the uid: no compiler, and no development dependency, in what runs. (Python is
    // there in the Debian base: Debian's npm depends on it.)
    assert.equal(probe.trim(), String(IMAGE_UID));

    // First start on a new volume: a token, a plant, a clean stop.
    const volume = join(makeTempDir(t), 'volume');
    mkdirSync(volume, { mode: 0o700 });
    // What docker does for a new named volume: the image's directory's owner and mode.
    chownSync(volume, IMAGE_UID, IMAGE_UID);
    const starting = Date.now();
    const server = await serve(t, first, config, volume);
    t.diagnostic(`listening ${seconds(starting)} after start`);
    assert.equal(await healthcheck(first, config, server.url), 0, 'healthy while serving');
    const token = (
      await check('buildah', [
        'run',
        ...ISOLATION,
        '--volume',
        `${volume}:${VOLUME}`,
        first,
        '--',
        ...config.Entrypoint,
        'token',
        'create',
        '--name',
        'container test',
      ])
    ).trim();
    assert.match(token, /^\S+$/);
    const id = '9007199254740993';
    const created = await fetch(`${server.url}/plants`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: `{"id": ${id}, "name": "Fern", "tag": "shade"}`,
    });
    assert.equal(created.status, 201, await created.text());
    t.diagnostic(`stopped in ${await stop(server)} ms`);
    assert.notEqual(await healthcheck(first, config, server.url), 0, 'unhealthy once stopped');

    // A new container from the image, on the same volume, has the plant.
    const second = await newContainer(t);
    const again = await serve(t, second, config, volume);
    const read = await fetch(`${again.url}/plants/${id}`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    assert.equal(read.status, 200);
    assert.equal(await read.text(), `{"id":${id},"name":"Fern","tag":"shade"}\n`);
    await stop(again);
  },
);
