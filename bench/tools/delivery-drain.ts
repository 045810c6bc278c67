// What one delivered webhook message costs on PostgreSQL (or SQLite, `--sqlite`), with
// nothing else running: N healthy endpoints subscribed to `plant.created` at a receiver here
// that answers 204, a server from dist/ (`npm run build` first) on core 0, `--plants` creates
// through its API, then the time until the receiver has every message (plants × endpoints),
// the server's CPU and its PostgreSQL backends' over that time, each divided by the messages.
// The fan-out, the claims, the attempts and their records are all in it; it also counts the
// connections opened to the receiver. Where endpoint-burst says what deliveries take from
// creates made at once, this says what a delivery costs, without the creates' noise: the
// figure to cut, and to compare before and after a change, on the same machine the same day.
//
//   npx tsx bench/tools/delivery-drain.ts [--endpoints 1000] [--plants 30] [--runs 3]
//     [--database-url postgres://postgres@127.0.0.1:5432/test | --sqlite]

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BENCH_POSTGRES_URL, loopbackPort, seedSchema } from '../data/postgres.js';
import { seedSqlite } from '../data/seed.js';
import { cpuOf, cpuSince, treeCpuSeconds } from '../harness/cpu.js';
import { hasTaskset, pinSelf, startServer, stop } from '../harness/servers.js';
import { median } from '../harness/summary.js';
import { healthyReceiver, subscribeEndpoints } from './healthy-receiver.js';

const { values } = parseArgs({
  options: {
    endpoints: { type: 'string', default: '1000' },
    plants: { type: 'string', default: '30' },
    runs: { type: 'string', default: '3' },
    'database-url': { type: 'string', default: BENCH_POSTGRES_URL },
    sqlite: { type: 'boolean', default: false },
  },
});
const endpoints = Number(values.endpoints);
const plants = Number(values.plants);
const runs = Number(values.runs);
const adminUrl = values['database-url'];
const sqlite = values.sqlite;
if (hasTaskset) pinSelf(1);

const receiver = await healthyReceiver();
const dir = mkdtempSync(join(tmpdir(), 'plantstore-drain-'));

const results: { seconds: number; serverUs: number; dbUs: number }[] = [];
try {
  for (let run = 0; run < runs; run++) {
    const tokensFile = join(dir, `${run}.tokens`);
    let where: { db: string } | { databaseUrl: string };
    let schema: Awaited<ReturnType<typeof seedSchema>> | undefined;
    if (sqlite) {
      where = { db: join(dir, `${run}.db`) };
      await seedSqlite(where.db, 1, tokensFile);
    } else {
      schema = await seedSchema(adminUrl, 1, tokensFile);
      where = { databaseUrl: schema.url };
    }
    try {
      await subscribeEndpoints({ db: '', ...where }, receiver.url, endpoints);
      const server = await startServer(
        'plantstore',
        {
          kind: 'plantstore',
          ...where,
          durability: 'power',
          logLevel: 'warn',
          extraArgs: [
            '--webhook-allow-networks',
            '127.0.0.0/8',
            '--webhook-max-endpoints',
            String(Math.max(endpoints, 100)),
          ],
        },
        '0',
      );
      try {
        const port = schema === undefined ? undefined : loopbackPort(schema.url);
        const backends = () =>
          port === undefined || schema === undefined
            ? Promise.resolve(undefined)
            : schema.keeper.backendPids(server.pid, port);
        const token = readFileSync(tokensFile, 'utf8').split('\n')[0]!;
        const done = receiver.until(receiver.delivered() + plants * endpoints);
        const connectionsBefore = receiver.connections();
        const started = performance.now();
        const cpu = treeCpuSeconds(server.pid) ?? NaN;
        const db = cpuOf(await backends());
        for (let i = 0; i < plants; i++) {
          const answer = await fetch(`${server.url}/plants`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name: `drain ${i + 1}` }),
          });
          if (answer.status !== 201) throw new Error(`create answered ${answer.status}`);
        }
        await done;
        const seconds = (performance.now() - started) / 1000;
        const messages = plants * endpoints;
        const result = {
          seconds,
          serverUs: (((treeCpuSeconds(server.pid) ?? NaN) - cpu) / messages) * 1e6,
          dbUs: (cpuSince(db, cpuOf(await backends())) / messages) * 1e6,
        };
        results.push(result);
        console.log(
          `run ${run + 1}: ${messages} messages in ${seconds.toFixed(1)} s ` +
            `(${(messages / seconds).toFixed(0)}/s), CPU a message: server ` +
            `${result.serverUs.toFixed(0)} µs, PostgreSQL ${result.dbUs.toFixed(0)} µs; ` +
            `${receiver.connections() - connectionsBefore} connections opened`,
        );
      } finally {
        await stop(server);
      }
    } finally {
      await schema?.drop();
    }
  }
  const f = (key: 'seconds' | 'serverUs' | 'dbUs') => median(results.map((r) => r[key]));
  console.log(
    `medians: ${((plants * endpoints) / f('seconds')).toFixed(0)} messages/s; CPU a message: ` +
      `server ${f('serverUs').toFixed(0)} µs, PostgreSQL ${f('dbUs').toFixed(0)} µs`,
  );
} finally {
  receiver.close();
  rmSync(dir, { recursive: true, force: true });
}
