import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { type TestContext, test } from 'node:test';
import Database from 'better-sqlite3';
import { createClient, type FeedEvent, PlantstoreError } from '@plantstore/client';
import { cleanEnv, cli, ROOT, runCli, startServer } from '../helpers/server-process.js';
import { makeTempDir } from '../helpers/setup.js';

// Issue 26, item 5: the client's events() and `plantstore events tail`, against real servers
// (dist/, npm run build) on SQLite: ids and positions exact, every change once and in order,
// resumed by themselves after the server went away, and a position no longer kept ending
// them with the reason.

const BIG = 9223372036854775807n;

async function feedServer(t: TestContext, port?: number) {
  const db = join(makeTempDir(t), 'feed.db');
  const scopes = 'plants:read,plants:write,events:read';
  const token = (await cli(['token', 'create', '--db', db, '--scopes', scopes])).stdout.trim();
  const server = await startServer(t, ['--db', db, ...(port ? ['--port', String(port)] : [])]);
  return { db, token, server };
}

/** Takes the next `n` events from the iterator (leaving it open), failing after `ms`. */
async function take(feed: AsyncGenerator<FeedEvent>, n: number, ms = 15_000) {
  const got: FeedEvent[] = [];
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`only ${got.length} of ${n} events in ${ms} ms`)),
      ms,
    );
  });
  try {
    while (got.length < n) {
      const next = await Promise.race([feed.next(), late]);
      assert.ok(!next.done, 'the iterator ended');
      got.push(next.value);
    }
  } finally {
    clearTimeout(timer);
  }
  return got;
}

for (const mode of ['stream', 'poll'] as const) {
  test(`events() (${mode}): every change once, in order, ids exact; resumed after a restart`, async (t) => {
    const { db, token, server } = await feedServer(t);
    const client = createClient({ baseUrl: server.url, token });
    const stop = new AbortController();
    t.after(() => stop.abort());
    const feed = client.events({ mode, signal: stop.signal, backoffMs: 50 });
    await client.plants.create({ id: BIG, name: 'Fern', tag: 'shade' });
    await client.plants.update(BIG, { tag: null });
    const [created, updated] = await take(feed, 2);
    assert.deepEqual(
      { type: created!.type, data: created!.data },
      { type: 'plant.created', data: { id: BIG, name: 'Fern', tag: 'shade' } },
    );
    assert.equal(typeof created!.position, 'bigint');
    assert.deepEqual(updated!.data, { id: BIG, name: 'Fern' });
    assert.ok(updated!.position > created!.position);
    assert.equal(
      mode === 'poll' ? typeof updated!.at : updated!.at,
      mode === 'poll' ? 'string' : undefined,
    );

    // The server goes away, and comes back on the same port: the loop resumes after the last
    // event it yielded, with nothing twice and nothing missed.
    const port = Number(new URL(server.url).port);
    server.child.kill('SIGTERM');
    await server.exited;
    const again = await startServer(t, ['--db', db, '--port', String(port)]);
    const other = createClient({ baseUrl: again.url, token });
    await other.plants.delete(BIG);
    const [deleted] = await take(feed, 1);
    assert.equal(deleted!.type, 'plant.deleted');
    assert.ok(deleted!.position > updated!.position);
  });
}

test('events() ends with PlantstoreError 41001 when the position is no longer kept', async (t) => {
  const { db, token, server } = await feedServer(t);
  const client = createClient({ baseUrl: server.url, token });
  for (const name of ['a', 'b', 'c']) await client.plants.create({ name });
  const seed = new Database(db);
  seed.prepare('UPDATE event_horizon SET position = 2').run();
  seed.close();
  for (const mode of ['stream', 'poll'] as const) {
    await assert.rejects(
      take(client.events({ mode, after: 1n }), 1),
      (error: unknown) => error instanceof PlantstoreError && error.code === 41001,
    );
    const [kept] = await take(client.events({ mode, after: 2n }), 1);
    assert.equal(kept!.data.name, 'c');
  }
});

test('plantstore events tail: lines for people, --json exact, --after; Ctrl-C ends it', async (t) => {
  const { token, server } = await feedServer(t);
  const client = createClient({ baseUrl: server.url, token });
  await client.plants.create({ id: BIG, name: 'Fern\u001b[31m', tag: 'shade' });
  await client.plants.create({ id: 7n, name: 'Aloe' });
  const tail = (args: string[]) => {
    const child = spawn(
      process.execPath,
      ['bin/plantstore', 'events', 'tail', '--url', server.url, ...args],
      {
        cwd: ROOT,
        env: { ...cleanEnv(), PLANTSTORE_TOKEN: token },
      },
    );
    t.after(() => child.kill('SIGKILL'));
    const lines: string[] = [];
    const waiting: (() => void)[] = [];
    createInterface({ input: child.stdout }).on('line', (text) => {
      lines.push(text);
      waiting.splice(0).forEach((wake) => wake());
    });
    const until = async (n: number) => {
      const deadline = Date.now() + 15_000;
      while (lines.length < n) {
        assert.ok(Date.now() < deadline, `only ${lines.length} lines: ${lines.join('\n')}`);
        await new Promise<void>((resolve) => {
          waiting.push(resolve);
          setTimeout(resolve, 200);
        });
      }
      return lines.slice(0, n);
    };
    return { child, until };
  };

  const text = tail([]);
  const [first, second] = await text.until(2);
  assert.equal(first, '1  plant.created  9223372036854775807  Fern\\u{1b}[31m  shade');
  assert.equal(second, '2  plant.created  7  Aloe  -');
  await client.plants.delete(7n);
  assert.equal((await text.until(3))[2], '3  plant.deleted  7  Aloe  -');
  text.child.kill('SIGINT');
  const code = await new Promise<number | null>((resolve) =>
    text.child.once('exit', (exitCode) => resolve(exitCode)),
  );
  assert.equal(code, 0);

  const json = tail(['--json', '--after', '1']);
  const lines = await json.until(2);
  assert.deepEqual(lines, [
    '{"position":2,"type":"plant.created","data":{"id":7,"name":"Aloe"}}',
    '{"position":3,"type":"plant.deleted","data":{"id":7,"name":"Aloe"}}',
  ]);

  const refused = await runCli(['events', 'tail', '--url', server.url, '--after', '01'], {
    env: { PLANTSTORE_TOKEN: token },
  });
  assert.equal(refused.code, 2);
  assert.match(refused.stderr, /the position is written without leading zeros/);
  const shouted = await runCli(['events', 'tail', '--url', server.url, '--after', 'NOW'], {
    env: { PLANTSTORE_TOKEN: token },
  });
  assert.equal(shouted.code, 2);
  assert.match(
    shouted.stderr,
    /--after takes a position from 0 to 9223372036854775807, or now, not "NOW"/,
  );
  for (const wrong of ['-1', '-1x', '9223372036854775808']) {
    const refusal = await runCli(['events', 'tail', '--url', server.url, '--after', wrong], {
      env: { PLANTSTORE_TOKEN: token },
    });
    assert.equal(refusal.code, 2, wrong);
    assert.ok(
      refusal.stderr.includes(`from 0 to 9223372036854775807, or now, not "${wrong}"`),
      refusal.stderr,
    );
  }

  // From now: plants are created until a line comes; it is one of them, never Fern or Aloe.
  const fromNow = tail(['--after', 'now']);
  let printed = false;
  const line = fromNow.until(1).finally(() => (printed = true));
  const later: string[] = [];
  while (!printed) {
    later.push(`later${later.length}`);
    await client.plants.create({ name: later.at(-1)! });
  }
  assert.match(
    (await line)[0]!,
    new RegExp(`^\\d+  plant\\.created  \\d+  (${later.join('|')})  -$`),
  );
});

for (const mode of ['stream', 'poll'] as const) {
  test(`events({ after: 'now' }) (${mode}): only the changes made after it began`, async (t) => {
    const { token, server } = await feedServer(t);
    const client = createClient({ baseUrl: server.url, token });
    for (const name of ['a', 'b']) await client.plants.create({ name });
    const stop = new AbortController();
    t.after(() => stop.abort());
    const feed = client.events({ mode, after: 'now', signal: stop.signal });
    let yielded = false;
    const first = take(feed, 1).finally(() => (yielded = true));
    // The feed may begin after the first of these: it yields one of them, never a or b.
    const later: string[] = [];
    while (!yielded) {
      later.push(`later${later.length}`);
      await client.plants.create({ name: later.at(-1)! });
    }
    const [event] = await first;
    assert.ok(event !== undefined);
    assert.ok(later.includes(event.data.name), event.data.name);
    const next = later.indexOf(event.data.name) + 1;
    await client.plants.create({ name: 'last' });
    const rest = await take(feed, later.length - next + 1);
    assert.deepEqual(
      rest.map((e) => e.data.name),
      [...later.slice(next), 'last'],
    );
  });
}
