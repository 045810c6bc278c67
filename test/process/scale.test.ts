import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { type TestContext, test } from 'node:test';
import { TOKEN_CACHE_TTL_MS } from '../../src/service/token-service.js';
import { type Backend, forEachBackend } from '../helpers/backends.js';
import {
  cli,
  LISTENING,
  type LogLine,
  type Server,
  sleep,
  startServer,
} from '../helpers/server-process.js';

// Several server processes on one database, on SQLite and on PostgreSQL alike: races
// between processes, `serve --workers`, and revocations made by the CLI meanwhile.

const CONCURRENT = 64;

/** A new token with both scopes (printed alone on stdout by `token create`). */
async function createToken(db: string[], name: string): Promise<string> {
  const { stdout } = await cli(['token', 'create', ...db, '--name', name]);
  const token = stdout.trim();
  assert.match(token, /^pst_[A-Za-z0-9_-]{43}$/);
  return token;
}

interface ListedToken {
  id: number;
  name: string;
  revoked: string | null;
}

/** `token list --json`: one JSON object per line. */
async function listTokens(db: string[]): Promise<ListedToken[]> {
  const { stdout } = await cli(['token', 'list', '--json', ...db]);
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as ListedToken);
}

interface Answer {
  status: number;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * One request on a connection of its own (`Connection: close`), so that every request
 * is a new connection: what a cluster primary hands to its workers in turn.
 */
function send(
  url: string,
  method: string,
  path: string,
  options: { token?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url + path, {
      method,
      agent: false,
      headers: {
        connection: 'close',
        ...options.headers,
        ...(options.token !== undefined && { authorization: `Bearer ${options.token}` }),
        ...(options.body !== undefined && {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(options.body)),
        }),
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
      res.on('error', reject);
    });
    req.end(options.body);
  });
}

/**
 * The log lines of the requests these answers came from (by X-Request-Id), once all are
 * logged: a request's line is written as its answer completes, so it may trail the answer.
 */
async function requestLines(server: Server, answers: Answer[]): Promise<LogLine[]> {
  const ids = answers.map((answer) => String(answer.headers['x-request-id']));
  const deadline = Date.now() + 5_000;
  for (;;) {
    const lines = server.logs.filter(
      (line) => line.msg === 'request' && ids.includes(String(line.reqId)),
    );
    if (lines.length >= ids.length || Date.now() > deadline) return lines;
    await sleep(20);
  }
}

/** How many answers had each status, e.g. {"204":1,"404":63}. */
function tally(answers: Answer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

/** Asserts an error answer: the status and exactly `{"error": <code>, "message": <string>}`. */
function assertError(answer: Answer, status: number, code: number): void {
  assert.equal(answer.status, status, answer.text);
  const parsed = JSON.parse(answer.text) as Record<string, unknown>;
  assert.deepEqual(Object.keys(parsed).sort(), ['error', 'message'], answer.text);
  assert.equal(parsed.error, code, answer.text);
  assert.equal(typeof parsed.message, 'string', answer.text);
  assert.ok(answer.text.startsWith(`{"error":${code},`), answer.text);
}

/** Two servers on one database, and a token both accept (and have cached). */
async function twoServers(t: TestContext, backend: Backend) {
  const db = (await backend.fresh(t)).args;
  const token = await createToken(db, 'scale');
  const servers = await Promise.all([startServer(t, db), startServer(t, db)]);
  assert.notEqual(servers[0].url, servers[1].url);
  assert.notEqual(servers[0].child.pid, servers[1].child.pid);
  return { db, token, servers };
}

/** Pids of the processes whose parent is `parent`, from /proc/<pid>/stat. */
function childrenOf(parent: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // Exited meanwhile.
    }
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[1]) === parent) children.push(Number(entry));
  }
  return children.sort((a, b) => a - b);
}

/** Whether a process with this pid exists and is not a zombie. */
function alive(pid: number): boolean {
  if (!existsSync(`/proc/${pid}`)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

forEachBackend((backend) => {
  test(`${CONCURRENT} concurrent POSTs with one Idempotency-Key across two server processes create one plant`, async (t) => {
    const { db, token, servers } = await twoServers(t, backend);
    const body = '{"name":"Once","tag":"retry"}';
    const headers = { 'idempotency-key': '"order-7f3a"' };
    const answers = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        send(servers[i % 2]!.url, 'POST', '/plants', { token, body, headers }),
      ),
    );
    const created = answers.filter((answer) => answer.status === 201);
    assert.ok(created.length >= 1, JSON.stringify(tally(answers)));
    for (const answer of answers) {
      if (answer.status !== 201) assertError(answer, 409, 40903);
    }
    // Every 201 is the same plant: the first, or the first replayed.
    const first = created.find((answer) => answer.headers['idempotent-replayed'] === undefined);
    assert.ok(first, 'one answer is the create itself');
    for (const answer of created) assert.equal(answer.text, first.text);
    assert.equal(
      created.length - 1,
      created.filter((a) => a.headers['idempotent-replayed'] === 'true').length,
    );

    // Once it is answered, a retry on either process replays it; the store has one plant.
    for (const server of servers) {
      const retry = await send(server.url, 'POST', '/plants', { token, body, headers });
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.text, first.text);
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(retry.headers.location, first.headers.location);
    }
    const listed = await send(servers[1]!.url, 'GET', '/plants', { token });
    assert.equal(listed.text, `[${first.text.trimEnd()}]\n`);
    const { stdout } = await cli(['audit', '--json', ...db]);
    const creates = stdout.split('\n').filter((line) => line.includes('"action":"create"'));
    assert.equal(creates.length, 1, stdout);
  });

  test(`${CONCURRENT} concurrent DELETEs of one id across two server processes: one 204, the rest 404`, async (t) => {
    const { token, servers } = await twoServers(t, backend);
    const id = '9223372036854775806';
    const plant = `{"id":${id},"name":"Contested","tag":"race"}`;

    const created = await send(servers[0].url, 'POST', '/plants', { token, body: plant });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.text, `${plant}\n`);
    // The other process sees it (and both have the token cached and a connection open).
    for (const server of servers) {
      const seen = await send(server.url, 'GET', `/plants/${id}`, { token });
      assert.equal(seen.status, 200, seen.text);
      assert.equal(seen.text, `${plant}\n`);
    }

    const answers = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        send(servers[i % 2]!.url, 'DELETE', `/plants/${id}`, { token }),
      ),
    );
    assert.deepEqual(tally(answers), { 204: 1, 404: CONCURRENT - 1 });
    for (const answer of answers) {
      if (answer.status === 204) assert.equal(answer.text, '');
      else assertError(answer, 404, 40401);
    }
    // Each process answered its half: the log of each has its requests' lines.
    for (const [n, server] of servers.entries()) {
      const mine = answers.filter((_, i) => i % 2 === n);
      const lines = await requestLines(server, mine);
      assert.equal(
        lines.length,
        CONCURRENT / 2,
        `server ${n} logged ${lines.length} of its requests`,
      );
      for (const line of lines) assert.equal(line.method, 'DELETE');
    }

    for (const server of servers) {
      assertError(await send(server.url, 'GET', `/plants/${id}`, { token }), 404, 40401);
      assertError(await send(server.url, 'DELETE', `/plants/${id}`, { token }), 404, 40401);
    }
  });

  test(`${CONCURRENT} concurrent POSTs of one id across two server processes: one 201, the rest 409`, async (t) => {
    const { token, servers } = await twoServers(t, backend);
    const id = '9223372036854775805';
    // Warm up: both processes have the token cached and the database open.
    for (const server of servers) {
      assertError(await send(server.url, 'GET', `/plants/${id}`, { token }), 404, 40401);
    }

    const bodies = Array.from(
      { length: CONCURRENT },
      (_, i) => `{"id":${id},"name":"Attempt ${i}","tag":"server-${i % 2}"}`,
    );
    const answers = await Promise.all(
      bodies.map((body, i) => send(servers[i % 2]!.url, 'POST', '/plants', { token, body })),
    );
    assert.deepEqual(tally(answers), { 201: 1, 409: CONCURRENT - 1 });
    const winner = answers.findIndex((answer) => answer.status === 201);
    assert.equal(answers[winner]!.text, `${bodies[winner]}\n`);
    assert.equal(answers[winner]!.headers.location, `/plants/${id}`);
    for (const answer of answers) if (answer.status === 409) assertError(answer, 409, 40901);

    // Both processes now read the winner's plant, and only it.
    for (const server of servers) {
      const read = await send(server.url, 'GET', `/plants/${id}`, { token });
      assert.equal(read.status, 200, read.text);
      assert.equal(read.text, `${bodies[winner]}\n`);
      const listed = await send(server.url, 'GET', '/plants', { token });
      assert.equal(listed.status, 200, listed.text);
      assert.equal(listed.text, `[${bodies[winner]}]\n`);
    }
  });

  test(`serve --workers 2 runs two worker processes that share the port and stop with the primary on SIGTERM`, async (t) => {
    const db = (await backend.fresh(t)).args;
    const token = await createToken(db, 'workers');
    const workerPids: number[] = [];
    const primary = await startServer(t, [...db, '--workers', '2'], workerPids);
    const primaryPid = primary.child.pid!;

    // Both workers listen, on the same address.
    const listening = async () => {
      for (;;) {
        const lines = primary.logs.filter((line) => LISTENING.test(line.msg ?? ''));
        if (new Set(lines.map((line) => line.pid)).size >= 2) return lines;
        await primary.waitForLog(
          (line) => LISTENING.test(line.msg ?? '') && !lines.includes(line),
          'a second worker listening',
        );
      }
    };
    const listens = await listening();
    const logged = [...new Set(listens.map((line) => line.pid!))].sort((a, b) => a - b);
    workerPids.push(...logged);
    assert.equal(logged.length, 2, JSON.stringify(listens));
    assert.ok(!logged.includes(primaryPid), 'the primary itself does not serve');
    // Both on the same address (node:cluster shares the port 0 picked first).
    assert.deepEqual(
      new Set(listens.map((line) => line.msg)),
      new Set([`Server listening at ${primary.url}`]),
    );

    // The primary's children are exactly those two workers.
    const children = childrenOf(primaryPid);
    assert.deepEqual(children, logged, `children of ${primaryPid}`);
    for (const pid of children) {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      assert.ok(
        cmdline.includes('serve') && cmdline.includes('2'),
        `worker ${pid}: ${cmdline.join(' ')}`,
      );
    }

    // It answers, and the connections are spread over both workers.
    const plant = '{"id":9223372036854775807,"name":"Clustered"}';
    const created = await send(primary.url, 'POST', '/plants', { token, body: plant });
    assert.equal(created.status, 201, created.text);
    const reads = await Promise.all(
      Array.from({ length: 16 }, () =>
        send(primary.url, 'GET', '/plants/9223372036854775807', { token }),
      ),
    );
    for (const read of reads) assert.deepEqual([read.status, read.text], [200, `${plant}\n`]);
    const health = await send(primary.url, 'GET', '/healthz');
    assert.equal(health.status, 200, health.text);
    const requestLog = await requestLines(primary, [created, ...reads, health]);
    assert.equal(requestLog.length, reads.length + 2, 'every request logged');
    const served = [...new Set(requestLog.map((line) => line.pid!))].sort((a, b) => a - b);
    assert.deepEqual(served, logged, 'the workers that logged the requests');

    const started = Date.now();
    primary.child.kill('SIGTERM');
    const exit = await Promise.race([primary.exited, sleep(10_000).then(() => 'timeout' as const)]);
    assert.deepEqual(exit, { code: 0, signal: null }, `after ${Date.now() - started} ms`);
    assert.ok(
      primary.logs.some((line) => line.msg === 'stopped' && line.pid === primaryPid),
      JSON.stringify(primary.logs.filter((line) => line.msg !== 'request')),
    );
    // The workers are gone too (given a moment for the kernel to reap them).
    const deadline = Date.now() + 1_000;
    while (logged.some(alive) && Date.now() < deadline) await sleep(20);
    assert.deepEqual(logged.filter(alive), [], 'workers still running after the primary exited');
    assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
    // Each worker drained and stopped on its own, rather than being killed.
    for (const pid of logged) {
      assert.ok(
        primary.logs.some((line) => line.msg === 'stopped' && line.pid === pid),
        `worker ${pid} did not log "stopped"`,
      );
    }
  });

  test(`a token revoked through the CLI is refused by a running server within TOKEN_CACHE_TTL_MS + 1 s`, async (t) => {
    const db = (await backend.fresh(t)).args;
    const tokens = {
      revoked: await createToken(db, 'to-revoke'),
      kept: await createToken(db, 'to-keep'),
    };
    const before = await listTokens(db);
    assert.deepEqual(
      before.map(({ name, revoked }) => [name, revoked]),
      [
        ['to-revoke', null],
        ['to-keep', null],
      ],
    );
    const revoked = { token: tokens.revoked, id: before[0]!.id };
    const kept = { token: tokens.kept, id: before[1]!.id };
    const server = await startServer(t, db);

    // Used, so the server has it cached; and accepted right before the revocation.
    for (const token of [revoked.token, kept.token, revoked.token]) {
      const ok = await send(server.url, 'GET', '/plants', { token });
      assert.equal(ok.status, 200, ok.text);
    }

    const { stderr } = await cli(['token', 'revoke', String(revoked.id), ...db]);
    assert.match(stderr, new RegExp(`^revoked token ${revoked.id} in `, 'm'));
    const revokedAt = Date.now();
    const limit = TOKEN_CACHE_TTL_MS + 1_000;
    let refused: Answer | undefined;
    const statuses: number[] = [];
    while (Date.now() - revokedAt < limit) {
      const answer = await send(server.url, 'GET', '/plants', { token: revoked.token });
      statuses.push(answer.status);
      if (answer.status !== 200) {
        refused = answer;
        break;
      }
      await sleep(50);
    }
    assert.ok(refused, `still accepted ${limit} ms after the revocation: ${statuses.join(',')}`);
    assertError(refused, 401, 40101);
    assert.match(String(refused.headers['www-authenticate']), /error="invalid_token"/);
    const elapsed = Date.now() - revokedAt;
    assert.ok(elapsed <= limit, `refused only after ${elapsed} ms`);

    // Refused from then on; the other token is unaffected.
    assertError(await send(server.url, 'GET', '/plants', { token: revoked.token }), 401, 40101);
    const other = await send(server.url, 'GET', '/plants', { token: kept.token });
    assert.equal(other.status, 200, other.text);
    const states = await listTokens(db);
    assert.notEqual(states.find((s) => s.id === revoked.id)?.revoked, null);
    assert.equal(states.find((s) => s.id === kept.id)?.revoked, null);
  });
});
