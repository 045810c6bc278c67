import { parseArgs } from 'node:util';

export interface BenchOptions {
  quick: boolean;
  /** Measured rounds per group (after one warm-up turn per contender). */
  rounds: number;
  /** Seconds per turn (wrk takes whole seconds). */
  turnSeconds: number;
  /** Connections of the main rows (the targets are at 64). */
  connections: number;
  /** plantstore's --log-level: its default, info, unless asked otherwise. */
  logLevel: string;
  /** Plants in the large database (1,000,000; 100,000 in --quick). */
  largePlants: number;
  smallPlants: number;
  /** Only the groups whose id contains one of these (e.g. `postgres`, `getOne`, `/1`). */
  only: string[];
  /** A full run: every group, full length; the only kind that may write bench/RESULTS.md. */
  full: boolean;
}

export const USAGE = `npm run bench -- [--quick] [--rounds N] [--turn SECONDS] [--connections 64]
                    [--plants N] [--small-plants N] [--log-level info] [--only PART,...]

  --quick          2 rounds on 100k plants: a smoke test in under 3 minutes; never
                   writes bench/RESULTS.md
  --rounds N       measured rounds per group (default 8); each contender one turn a round
  --turn SECONDS   length of one turn of load, whole seconds (default 1)
  --only PART,...  only the groups whose id contains a PART, e.g. postgres, sqlite-large,
                   getOne, /1 (one connection), tagList, client-ids, the webhook
                   rows for \`webhooks\` (the lag beside hung endpoints alone for
                   \`webhook-lag\`), the import rows for \`plants-import\`,
                   deliveries and audit for \`deliveries-audit\`, the changes
                   feed rows for \`events\`;
                   such a run never writes bench/RESULTS.md

PostgreSQL rows use PLANTSTORE_BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test).
The load generator is wrk; without it the benchmark stops and says so.`;

function positiveInteger(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^[1-9][0-9]*$/.test(text)) throw new Error(`--${name} must be a positive whole number`);
  return Number(text);
}

/** The options, or 'help' when --help was asked. Throws with a message on a bad one. */
export function parseOptions(argv: string[]): BenchOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      turn: { type: 'string' },
      connections: { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
      plants: { type: 'string' },
      'small-plants': { type: 'string' },
      only: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help';
  const quick = values.quick === true;
  const only = (values.only ?? '').split(',').filter((part) => part !== '');
  const options: BenchOptions = {
    quick,
    rounds: positiveInteger('rounds', values.rounds, quick ? 2 : 8),
    turnSeconds: positiveInteger('turn', values.turn, 1),
    connections: positiveInteger('connections', values.connections, 64),
    logLevel: values['log-level'] ?? 'info',
    largePlants: positiveInteger('plants', values.plants, quick ? 100_000 : 1_000_000),
    smallPlants: positiveInteger('small-plants', values['small-plants'], 10_000),
    only,
    full: false,
  };
  options.full =
    !quick &&
    only.length === 0 &&
    options.rounds >= 8 &&
    options.connections === 64 &&
    options.logLevel === 'info' &&
    options.largePlants === 1_000_000 &&
    options.smallPlants === 10_000;
  return options;
}
