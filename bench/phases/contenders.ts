/**
 * Contenders brought to life: each on its own copy of the seeded data, its server started
 * pinned to the servers' core, with the keeper that restores its table between turns.
 */
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { endpointArgs, subscribeEndpoints } from '../data/endpoints.js';
import { loopbackPort, type SeededSchema } from '../data/postgres.js';
import { SqliteKeeper } from '../data/seed.js';
import { machineCpu, treeCpuSeconds } from '../harness/cpu.js';
import { type Server, type ServerSpec, type Start, startServer, stop } from '../harness/servers.js';
import type { Contender } from '../harness/turn.js';
import { CONTENDERS, type ContenderName } from '../rows/plan.js';
import type { Placement } from './facts.js';

function sqliteSpec(name: ContenderName, db: string, logLevel: string): ServerSpec {
  const { role } = CONTENDERS[name];
  if (role.kind === 'plantstore') {
    const metrics = 'metrics' in role && role.metrics;
    const durability = role.durability ?? 'power';
    const extraArgs = 'endpoints' in role ? endpointArgs(role.endpoints) : [];
    return { kind: 'plantstore', db, durability, logLevel, metrics, extraArgs };
  }
  if (role.kind === 'bare') return { kind: 'bare-sqlite', db };
  return { kind: 'plugins' in role && role.plugins ? 'fastify-plugins' : 'fastify-sqlite', db };
}

/** A copy of the seeded SQLite database `seeded` (with its WAL checkpointed) for one server. */
export function copyDatabase(seeded: string, dir: string, name: string): string {
  const file = join(dir, `${name.replace(/[^a-z0-9]+/gi, '-')}.db`);
  cpSync(seeded, file);
  return file;
}

export interface SqliteData {
  file: string;
  tokensFile: string;
  plants: number;
  /** Plants more whose ids clients chose above the counter (bench/data/seed.ts). */
  clientIds: number;
}

async function timedStart(name: string, spec: ServerSpec, cores: string) {
  const machine = machineCpu();
  const harness = process.cpuUsage();
  const server = await startServer(name, spec, cores);
  const used = (treeCpuSeconds(server.pid) ?? 0) + cpuSeconds(process.cpuUsage(harness));
  const after = machineCpu();
  const start: Start = { readyMs: server.readyMs };
  if (machine !== undefined && after !== undefined) {
    start.otherCores = (after.busy - machine.busy - used) / (server.readyMs / 1000);
  }
  return { server, start };
}

const cpuSeconds = (usage: NodeJS.CpuUsage): number => (usage.user + usage.system) / 1e6;

/**
 * Starts `name` on `file` (a copy of its data set). With `starts` above 1 the server is
 * started that many times and stopped between, and every start is returned; the last one
 * stays up.
 */
export async function startSqliteContender(
  name: ContenderName,
  data: SqliteData,
  at: Placement,
  starts = 1,
): Promise<{ contender: Contender; starts: Start[] }> {
  const spec = sqliteSpec(name, data.file, at.logLevel);
  const { role } = CONTENDERS[name];
  if ('endpoints' in role) await subscribeEndpoints({ db: data.file }, role.endpoints);
  const done: Start[] = [];
  let server: Server | undefined;
  for (let i = 0; i < starts; i++) {
    if (server !== undefined) await stop(server);
    const timed = await timedStart(name, spec, at.serverCores);
    server = timed.server;
    done.push(timed.start);
  }
  const contender: Contender = {
    name,
    role: CONTENDERS[name].role,
    server: server!,
    keeper: new SqliteKeeper(data.file, data.clientIds),
    tokensFile: data.tokensFile,
    plants: data.plants,
    cursor: 0,
  };
  return { contender, starts: done };
}

export async function startPostgresContender(
  name: ContenderName,
  schema: SeededSchema,
  data: { tokensFile: string; plants: number },
  at: Placement,
): Promise<Contender> {
  const { role } = CONTENDERS[name];
  const endpoints = 'endpoints' in role ? role.endpoints : 0;
  await subscribeEndpoints({ db: '', databaseUrl: schema.url }, endpoints);
  const spec: ServerSpec =
    role.kind === 'plantstore'
      ? {
          kind: 'plantstore',
          databaseUrl: schema.url,
          durability: 'power',
          logLevel: at.logLevel,
          ...(endpoints > 0 && { extraArgs: endpointArgs(endpoints) }),
        }
      : { kind: 'bare-postgres', databaseUrl: schema.url };
  const server = await startServer(name, spec, at.serverCores);
  const pgPort = loopbackPort(schema.url);
  const contender: Contender = {
    name,
    role,
    server,
    keeper: schema.keeper,
    tokensFile: data.tokensFile,
    plants: data.plants,
    cursor: 0,
  };
  if (pgPort !== undefined)
    contender.backends = () => schema.keeper.backendPids(server.pid, pgPort);
  return contender;
}
