// Server-assigned creates straight against a PostgreSQL store, no HTTP: how many a second, and
// whether more of them at once go faster (creates used to take turns on one counter row).
// `bare` runs the same load as plain INSERTs with a sequence default, the ceiling this
// database gives a create with nothing else in its statement.
//
//   npx tsx bench/tools/store-creates.ts [--seconds 10] [--concurrency 1,64] [--pool-size 10]
//                                        [--durability power|process] [--bare]
//
// Uses PLANTSTORE_BENCH_DATABASE_URL (see bench/data/postgres.ts) in a schema of its own.

import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { BENCH_POSTGRES_URL } from '../data/postgres.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '1,64' },
    'pool-size': { type: 'string', default: '10' },
    durability: { type: 'string', default: 'power' },
    bare: { type: 'boolean', default: false },
  },
});
const seconds = Number(values.seconds);
const poolSize = Number(values['pool-size']);
const durability = values.durability === 'process' ? 'process' : 'power';

type Create = (n: number) => Promise<unknown>;

/** Runs `lanes` loops of `create` for `seconds`; creates per second. */
async function load(create: Create, lanes: number): Promise<number> {
  const until = Date.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (Date.now() < until) await create(done++);
    }),
  );
  return done / seconds;
}

async function inSchema<T>(work: (url: string) => Promise<T>): Promise<T> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: BENCH_POSTGRES_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const url = new URL(BENCH_POSTGRES_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  try {
    return await work(url.toString());
  } finally {
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  }
}

async function storeRun(lanes: number): Promise<number> {
  return inSchema(async (url) => {
    const store = await openPostgresStore({ url, durability, poolSize });
    try {
      return await load((n) => store.plants.insert({ name: `plant ${n}` }), lanes);
    } finally {
      await store.close();
    }
  });
}

async function bareRun(lanes: number): Promise<number> {
  return inSchema(async (url) => {
    const options = durability === 'process' ? '-c synchronous_commit=off' : undefined;
    const pool = new pg.Pool({ connectionString: url, max: poolSize, options });
    try {
      await pool.query('CREATE TABLE bare (id bigserial PRIMARY KEY, name text NOT NULL)');
      const insert = (n: number) =>
        pool.query({
          name: 'bare',
          text: 'INSERT INTO bare (name) VALUES ($1) RETURNING id',
          values: [`plant ${n}`],
        });
      return await load(insert, lanes);
    } finally {
      await pool.end();
    }
  });
}

for (const lanes of values.concurrency.split(',').map(Number)) {
  const rate = await (values.bare ? bareRun : storeRun)(lanes);
  const what = values.bare ? 'bare INSERT' : 'store.plants.insert';
  process.stdout.write(
    `${what}: ${lanes} at once, pool ${poolSize}, durability ${durability}, ${seconds} s: ${Math.round(rate)} creates/s\n`,
  );
}
