import { parseArgs } from 'node:util';

export interface BenchOptions {
  quick: boolean;
  /** Seconds of measured load per server and case. */
  duration: number;
  connections: number[];
  turnMs: number;
  durability: 'power' | 'process';
  logLevel: string;
  /** Plants in the large database (1,000,000; 100,000 in --quick). */
  largePlants: number;
  smallPlants: number;
}

const USAGE = `npm run bench -- [--quick] [--duration S] [--connections 1,64] [--turn-ms 500]
                    [--durability power|process] [--log-level info] [--plants N]`;

function positive(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`);
  return value;
}

export function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      duration: { type: 'string' },
      connections: { type: 'string', default: '1,64' },
      'turn-ms': { type: 'string' },
      durability: { type: 'string', default: 'power' },
      'log-level': { type: 'string', default: 'info' },
      plants: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const quick = values.quick === true;
  const durability = values.durability;
  if (durability !== 'power' && durability !== 'process') {
    throw new Error('--durability must be power or process');
  }
  const connections = (values.connections ?? '1,64')
    .split(',')
    .map((c) => positive('connections', c, 1));
  return {
    quick,
    duration: positive('duration', values.duration, quick ? 1 : 10),
    connections,
    turnMs: positive('turn-ms', values['turn-ms'], quick ? 200 : 500),
    durability,
    logLevel: values['log-level'] ?? 'info',
    largePlants: positive('plants', values.plants, quick ? 100_000 : 1_000_000),
    smallPlants: 10_000,
  };
}
