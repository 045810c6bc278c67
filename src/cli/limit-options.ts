import { Option } from 'commander';
import { IN_FLIGHT_PER_TOKEN, MAX_CONNECTIONS } from '../api/limits.js';
import { positiveInteger } from './options.js';

/** `--max-connections`: connections a process keeps open. */
export const maxConnectionsOption = () =>
  new Option(
    '--max-connections <n>',
    'open connections per process; past it a new one replaces an idle or stalled one, or is closed',
  )
    .env('PLANTSTORE_MAX_CONNECTIONS')
    .default(MAX_CONNECTIONS)
    .argParser(positiveInteger('connections', 1_000_000));

/** `--in-flight-per-token`: requests of one token a process serves at once. */
export const inFlightPerTokenOption = () =>
  new Option(
    '--in-flight-per-token <n>',
    'requests of one token served at once per process; past it 429 with Retry-After: 1',
  )
    .env('PLANTSTORE_IN_FLIGHT_PER_TOKEN')
    .default(IN_FLIGHT_PER_TOKEN)
    .argParser(positiveInteger('requests', 1_000_000));
