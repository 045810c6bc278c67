import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { type IncomingHttpHeaders, request } from 'node:http';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { cleanEnv, ROOT, type Server, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// Crash consistency of the SQLite store with the default durability ("power"): a real server
// process takes concurrent creates and deletes, is killed with SIGKILL mid-stream, and is
// restarted on the same file. Every answered write must have survived exactly as answered;
// writes in flight at the kill may have gone either way; nothing else may exist.
//
// The run is driven by a seeded PRNG (printed; CRASH_SEED=<n> replays the same choices and
// kill points, though not the same interleaving).

const MIN = -(2n ** 63n);
const MAX = 2n ** 63n - 1n;
const larger = (a: bigint, b: bigint) => (a > b ? a : b);
const WORKERS = 32;
const ROUNDS = 2;
/** Explicit ids: near the bottom, beyond 2^53 on both sides of zero, near the top. */
const MID = 2n ** 53n + 1n;
const HIGH_BASE = MAX - 10_000_000n;
/** Steps between explicit high ids. */
const HIGH_STEP = 1000n;

/** One plant as the service serializes it; ids as text, never through a number. */
const PLANT = String.raw`\{"id":(-?\d+),"name":("(?:[^"\\]|\\.)*")(?:,"tag":("(?:[^"\\]|\\.)*"))?\}`;
const PLANT_RE = new RegExp(`^${PLANT}$`);
const PLANTS_RE = new RegExp(PLANT, 'g');

/** mulberry32: small, fast, good enough to pick operations reproducibly. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function createToken(db: string): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['bin/plantstore', 'token', 'create', '--db', db, '--name', 'crash'],
    { cwd: ROOT, env: cleanEnv() },
  );
  return stdout.trim();
}

interface Answer {
  status: number;
  text: string;
  headers: IncomingHttpHeaders;
}

/**
 * One request on a connection of its own (no agent, no keep-alive). Resolves only with a
 * complete answer; a connection refused, reset or cut mid-answer rejects.
 */
function send(
  url: string,
  token: string | null,
  method: string,
  path: string,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url + path, {
      method,
      agent: false,
      timeout: 10_000,
      headers: {
        ...(token !== null && { authorization: `Bearer ${token}` }),
        ...(body !== undefined && {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
        }),
      },
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 10 s`)));
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('error', reject);
      res.on('close', () => {
        // The JSON text, without the newline that ends every body.
        const json = text.trimEnd();
        if (res.complete)
          resolve({ status: res.statusCode ?? 0, text: json, headers: res.headers });
        else reject(new Error(`${method} ${path}: answer cut off`));
      });
    });
    req.end(body);
  });
}

/** Runs `work` over `items`, at most `limit` at a time. */
async function eachLimit<T>(items: T[], limit: number, work: (item: T) => Promise<void>) {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await work(items[next++]!);
  });
  await Promise.all(lanes);
}

/** What the test knows about the database between rounds. */
interface Model {
  /** Plants certainly present: id -> exact body. */
  present: Map<string, string>;
  /** Ids certainly gone (an answered delete, or absent after a restart once committed). */
  gone: Set<string>;
  /** Every id known to have been committed at some point. */
  everCommitted: Set<string>;
  /** Counters of the explicit id pools, never reused across rounds. */
  counters: { low: bigint; midNeg: bigint; midPos: bigint; high: bigint };
  /**
   * Ids an explicit create is on its way for. Such an id can also be a server-assigned one
   * (the pools overlap on purpose), and answers arrive in any order, not in commit order:
   * while that create is unsettled, an answered delete of the id does not prove it gone.
   */
  pendingExplicit: Set<string>;
  maxSent: boolean;
  /** The largest server-assigned id known to have been committed. */
  highestAssigned: bigint;
}

/** What one round of writes left unresolved, and what went wrong during it. */
interface RoundOutcome {
  /** Explicit-id creates without an answer: id -> body they would have. */
  maybeCreated: Map<string, string>;
  /** Creates without id and without an answer: name (JSON literal) -> body after the id. */
  maybeAuto: Map<string, string>;
  /** Deletes without an answer: id -> body of the plant they targeted. */
  maybeDeleted: Map<string, string>;
  anomalies: string[];
  stats: RoundStats;
}

interface RoundStats {
  created: number;
  autoCreated: number;
  deleted: number;
  conflicts: number;
  inFlight: number;
}

const TAGS = ['shade', 'sun', 'tropical', 'succulent'];

/** The JSON text of a plant: the service's field order, tag omitted when absent. */
function plantBody(id: string, name: string, tag: string | undefined): string {
  return `{"id":${id}${restOf(name, tag)}`;
}

function restOf(name: string, tag: string | undefined): string {
  return `,"name":${JSON.stringify(name)}${tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`}}`;
}

/**
 * Concurrent creates and deletes until the server is killed with SIGKILL, once `killAfter`
 * writes have been answered (more are in flight then).
 * Answered writes are applied to the model as certain; the others are returned as maybes.
 */
async function writeRound(
  server: Server,
  token: string,
  model: Model,
  rng: () => number,
  round: number,
  killAfter: number,
  sendMax: boolean,
): Promise<RoundOutcome> {
  const out: RoundOutcome = {
    maybeCreated: new Map(),
    maybeAuto: new Map(),
    maybeDeleted: new Map(),
    anomalies: [],
    stats: { created: 0, autoCreated: 0, deleted: 0, conflicts: 0, inFlight: 0 },
  };
  const deletable = [...model.present.keys()];
  let killed = false;
  let answered = 0;
  let reachKillPoint!: () => void;
  const killPointReached = new Promise<void>((resolve) => (reachKillPoint = resolve));
  const countAnswer = () => {
    answered += 1;
    if (answered >= killAfter) reachKillPoint();
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rng() * items.length)]!;
  const anomaly = (what: string, answer?: Answer) =>
    out.anomalies.push(
      `round ${round}: ${what}${answer ? ` -> ${answer.status} ${answer.text}` : ''}`,
    );
  const failed = (error: unknown, what: string) => {
    out.stats.inFlight += 1;
    if (!killed) anomaly(`${what} failed before the kill: ${String(error)}`);
  };

  const create = async (id: string | undefined, name: string, tag: string | undefined) => {
    const body =
      id === undefined
        ? `{"name":${JSON.stringify(name)}${tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`}}`
        : plantBody(id, name, tag);
    const what = `POST /plants ${body}`;
    // A client may create a plant again with the explicit id of one it deleted (only
    // server-assigned ids are never reused): from here on, that id may exist again.
    if (id !== undefined) {
      model.gone.delete(id);
      model.pendingExplicit.add(id);
    }
    let answer: Answer;
    try {
      answer = await send(server.url, token, 'POST', '/plants', body);
    } catch (error) {
      if (id !== undefined) model.pendingExplicit.delete(id);
      failed(error, what);
      if (id === undefined) out.maybeAuto.set(JSON.stringify(name), restOf(name, tag));
      else out.maybeCreated.set(id, body);
      return;
    }
    countAnswer();
    if (id !== undefined) model.pendingExplicit.delete(id);
    if (answer.status === 201) {
      const got = PLANT_RE.exec(answer.text);
      const gotId = got?.[1];
      if (gotId === undefined) return anomaly(`${what}: not a plant`, answer);
      if (id !== undefined && answer.text !== body) anomaly(`${what}: body differs`, answer);
      if (id === undefined && answer.text !== plantBody(gotId, name, tag))
        anomaly(`${what}: body differs`, answer);
      if (answer.headers.location !== `/plants/${gotId}`)
        anomaly(`${what}: Location ${answer.headers.location}`, answer);
      if (id === undefined && model.everCommitted.has(gotId))
        anomaly(`${what}: server-assigned id ${gotId} was used before`, answer);
      model.present.set(gotId, answer.text);
      model.everCommitted.add(gotId);
      if (id === undefined) model.highestAssigned = larger(model.highestAssigned, BigInt(gotId));
      deletable.push(gotId);
      out.stats[id === undefined ? 'autoCreated' : 'created'] += 1;
    } else if (answer.status === 409 && id !== undefined && /"error":40901\b/.test(answer.text)) {
      // The id was taken by a server-assigned one in between: legitimate, nothing created.
      out.stats.conflicts += 1;
    } else {
      anomaly(what, answer);
    }
  };

  const remove = async (id: string) => {
    const what = `DELETE /plants/${id}`;
    const body = model.present.get(id)!;
    let answer: Answer;
    try {
      answer = await send(server.url, token, 'DELETE', `/plants/${id}`);
    } catch (error) {
      failed(error, what);
      // Unless a create of the same id was answered meanwhile: then this delete had
      // committed before it (the create could not succeed while the plant existed).
      if (model.present.get(id) === body) {
        model.present.delete(id);
        out.maybeDeleted.set(id, body);
      }
      return;
    }
    countAnswer();
    if (answer.status === 204 && answer.text === '') {
      // Unless a create of the same id was answered first (it committed after this delete).
      if (model.present.get(id) === body) {
        model.present.delete(id);
        if (!model.pendingExplicit.has(id)) model.gone.add(id);
      }
      out.stats.deleted += 1;
    } else {
      // Only plants known to exist are deleted, each once: anything but 204 is wrong.
      anomaly(what, answer);
    }
  };

  const worker = async (w: number) => {
    for (let n = 0; !killed; n++) {
      const name = `r${round} w${w} n${n} é`;
      const tag = rng() < 0.3 ? undefined : pick(TAGS);
      const dice = rng();
      if (sendMax && !model.maxSent && answered >= killAfter * 0.7) {
        model.maxSent = true;
        await create(String(MAX), name, tag);
      } else if (dice < 0.25 && deletable.length > 0) {
        const i = Math.floor(rng() * deletable.length);
        const id = deletable[i]!;
        deletable[i] = deletable[deletable.length - 1]!;
        deletable.pop();
        await remove(id);
      } else if (dice < 0.55) {
        await create(undefined, name, tag);
      } else {
        const c = model.counters;
        const kind = pick(['low', 'midNeg', 'midPos', 'high'] as const);
        const id =
          kind === 'low'
            ? MIN + c.low++
            : kind === 'midNeg'
              ? -MID - 2n * c.midNeg++
              : kind === 'midPos'
                ? MID + 2n * c.midPos++
                : HIGH_BASE + HIGH_STEP * c.high++;
        await create(String(id), name, tag);
      }
    }
  };

  const workers = Array.from({ length: WORKERS }, (_, w) => worker(w));
  // Unless the server dies first: then the exit status below says how.
  await Promise.race([killPointReached, server.exited]);
  killed = true;
  server.child.kill('SIGKILL');
  await Promise.all(workers);
  assert.deepEqual(await server.exited, { code: null, signal: 'SIGKILL' });
  return out;
}

/** Every plant, page by page, following the Link header; [id, exact body] in order. */
async function listAll(url: string, token: string): Promise<[string, string][]> {
  const plants: [string, string][] = [];
  let path: string | undefined = '/plants?limit=1000';
  while (path !== undefined) {
    const answer = await send(url, token, 'GET', path);
    assert.equal(answer.status, 200, `GET ${path}: ${answer.text}`);
    const parts = answer.text.match(PLANTS_RE) ?? [];
    assert.equal(`[${parts.join(',')}]`, answer.text, `GET ${path}: not a list of plants`);
    for (const part of parts) plants.push([PLANT_RE.exec(part)![1]!, part]);
    const link = answer.headers.link;
    assert.ok(link === undefined || typeof link === 'string', `GET ${path}: Link ${link}`);
    const next = link === undefined ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1];
    assert.ok(link === undefined || next !== undefined, `GET ${path}: Link ${link}`);
    path = next;
  }
  return plants;
}

/** `PRAGMA integrity_check` and the plant count, through a read-only connection of our own. */
function inspect(db: string): { integrity: unknown; count: bigint } {
  const conn = new Database(db, { readonly: true, fileMustExist: true });
  try {
    conn.defaultSafeIntegers(true);
    return {
      integrity: conn.pragma('integrity_check', { simple: true }),
      count: conn.prepare('SELECT count(*) FROM plants').pluck().get() as bigint,
    };
  } finally {
    conn.close();
  }
}

/**
 * After a restart: the database opens cleanly, answered writes are there exactly, nothing
 * unexplained exists. Resolves the round's maybes into the model.
 */
async function verifyAfterRestart(
  server: Server,
  token: string,
  db: string,
  model: Model,
  round: RoundOutcome,
  label: string,
): Promise<{ problems: string[]; note: string }> {
  const problems: string[] = [];
  for (const path of ['/healthz', '/readyz']) {
    const answer = await send(server.url, null, 'GET', path);
    assert.equal(answer.status, 200, `${label}: GET ${path} -> ${answer.status} ${answer.text}`);
    assert.equal(answer.text, '{"status":"ok"}');
  }
  const { integrity, count } = inspect(db);
  assert.equal(integrity, 'ok', `${label}: integrity_check`);

  const listed = await listAll(server.url, token);
  assert.equal(BigInt(listed.length), count, `${label}: listed plants against count(*)`);
  for (let i = 1; i < listed.length; i++) {
    if (BigInt(listed[i - 1]![0]) >= BigInt(listed[i]![0]))
      problems.push(`${label}: list not ascending at ${listed[i - 1]![0]}, ${listed[i]![0]}`);
  }
  const seen = new Map<string, string>();
  const resolved = { created: 0, autoCreated: 0, deleted: 0, notDeleted: 0 };
  for (const [id, text] of listed) {
    seen.set(id, text);
    const name = PLANT_RE.exec(text)![2]!;
    if (model.present.has(id)) {
      if (model.present.get(id) !== text)
        problems.push(`${label}: ${id} is ${text}, answered as ${model.present.get(id)}`);
    } else if (round.maybeCreated.get(id) === text) {
      resolved.created += 1;
    } else if (round.maybeDeleted.get(id) === text) {
      resolved.notDeleted += 1;
    } else if (
      round.maybeAuto.has(name) &&
      text === `{"id":${id}${round.maybeAuto.get(name)}` &&
      !model.everCommitted.has(id)
    ) {
      round.maybeAuto.delete(name);
      resolved.autoCreated += 1;
      model.highestAssigned = larger(model.highestAssigned, BigInt(id));
    } else {
      problems.push(`${label}: unexplained plant ${text}${model.gone.has(id) ? ' (deleted)' : ''}`);
    }
  }
  resolved.deleted = [...round.maybeDeleted.keys()].filter((id) => !seen.has(id)).length;
  const missing = [...model.present.keys()].filter((id) => !seen.has(id));
  for (const id of missing) problems.push(`${label}: answered plant ${id} is missing`);

  // One by one as well: every answered create reads back exactly, every answered delete is 404.
  await eachLimit([...model.present], 16, async ([id, text]) => {
    const answer = await send(server.url, token, 'GET', `/plants/${id}`);
    if (answer.status !== 200 || answer.text !== text)
      problems.push(`${label}: GET /plants/${id} -> ${answer.status} ${answer.text}, want ${text}`);
  });
  await eachLimit([...model.gone], 16, async (id) => {
    const answer = await send(server.url, token, 'GET', `/plants/${id}`);
    if (answer.status !== 404 || !/"error":40401\b/.test(answer.text))
      problems.push(`${label}: deleted /plants/${id} -> ${answer.status} ${answer.text}`);
  });

  // The database as it is now becomes what the next round starts from.
  for (const id of model.present.keys()) if (!seen.has(id)) model.gone.add(id);
  for (const id of round.maybeDeleted.keys()) if (!seen.has(id)) model.gone.add(id);
  model.present = seen;
  for (const id of seen.keys()) model.everCommitted.add(id);

  // A server-assigned id is never one a plant had, across the crash, even once the plant with
  // the largest id (a client's) is gone; and it is above every server-assigned id before it.
  const top = [...model.present.keys()].reduce<string | undefined>(
    (a, b) => (a === undefined || BigInt(b) > BigInt(a) ? b : a),
    undefined,
  );
  if (top !== undefined) {
    const answer = await send(server.url, token, 'DELETE', `/plants/${top}`);
    if (answer.status === 204) {
      model.present.delete(top);
      model.gone.add(top);
    } else {
      problems.push(`${label}: DELETE /plants/${top} -> ${answer.status} ${answer.text}`);
    }
  }
  const probe = await send(server.url, token, 'POST', '/plants', `{"name":"${label} probe"}`);
  const probeId = probe.status === 201 ? PLANT_RE.exec(probe.text)?.[1] : undefined;
  const fine =
    probeId !== undefined &&
    !model.everCommitted.has(probeId) &&
    BigInt(probeId) > model.highestAssigned;
  if (!fine)
    problems.push(
      `${label}: create without id, after ${model.highestAssigned} -> ${probe.status} ${probe.text}`,
    );
  if (probeId !== undefined) {
    model.present.set(probeId, probe.text);
    model.everCommitted.add(probeId);
    model.highestAssigned = larger(model.highestAssigned, BigInt(probeId));
  }

  const note = `${label}: ${listed.length} plants; in flight resolved as ${JSON.stringify(resolved)}`;
  return { problems, note };
}

test('SIGKILL during concurrent writes (SQLite, durability power): answered writes survive exactly, nothing else appears', async (t) => {
  const seed =
    process.env.CRASH_SEED === undefined ? randomInt(2 ** 31) : Number(process.env.CRASH_SEED);
  t.diagnostic(`seed ${seed} (replay the choices with CRASH_SEED=${seed})`);
  const rng = prng(seed);
  // Drawn first, so the kill schedule replays exactly whatever the workers draw later.
  const killPoints = Array.from({ length: ROUNDS }, () => 50 + Math.floor(rng() * 200));
  const db = join(makeTempDir(t), 'crash.db');
  const token = await createToken(db);
  let server = await startServer(t, ['--db', db]);

  const model: Model = {
    present: new Map(),
    gone: new Set(),
    everCommitted: new Set(),
    counters: { low: 0n, midNeg: 0n, midPos: 0n, high: 0n },
    pendingExplicit: new Set(),
    maxSent: false,
    highestAssigned: MIN,
  };
  // Seed: the extremes and their neighbours, around zero, just beyond 2^53, some assigned.
  const seeds: (bigint | undefined)[] = [MIN + 1_000_000n, -1n, 0n, 1n, 2n ** 53n, undefined];
  for (let i = 0; i < 40; i++) seeds.push(i % 3 === 0 ? BigInt(-1000 - i) : undefined);
  for (const [i, id] of seeds.entries()) {
    const body =
      id === undefined
        ? `{"name":"seed ${i}","tag":"seed"}`
        : plantBody(String(id), `seed ${i}`, undefined);
    const answer = await send(server.url, token, 'POST', '/plants', body);
    assert.equal(answer.status, 201, `seed ${body}: ${answer.text}`);
    const id2 = PLANT_RE.exec(answer.text)![1]!;
    model.present.set(id2, answer.text);
    model.everCommitted.add(id2);
    if (id === undefined) model.highestAssigned = larger(model.highestAssigned, BigInt(id2));
  }

  const problems: string[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const killAfter = killPoints[round - 1]!;
    const outcome = await writeRound(server, token, model, rng, round, killAfter, round === ROUNDS);
    t.diagnostic(
      `round ${round}: killed after ${killAfter} answers; ${JSON.stringify(outcome.stats)}`,
    );
    problems.push(...outcome.anomalies);
    assert.ok(outcome.stats.inFlight > 0, `round ${round}: the kill caught no request in flight`);
    server = await startServer(t, ['--db', db]);
    const verified = await verifyAfterRestart(
      server,
      token,
      db,
      model,
      outcome,
      `restart ${round}`,
    );
    t.diagnostic(verified.note);
    problems.push(...verified.problems);
  }

  // Graceful stop: exit 0, and the file is still sound once the server has closed it.
  server.child.kill('SIGTERM');
  assert.deepEqual(await server.exited, { code: 0, signal: null });
  const { integrity, count } = inspect(db);
  assert.equal(integrity, 'ok');
  assert.equal(count, BigInt(model.present.size));
  assert.deepEqual(problems.slice(0, 50), [], `seed ${seed}: ${problems.length} problems`);
});
