import type { Dialect } from '../../src/store/migrations.js';

// PLANTSTORE_TEST_BACKENDS chooses the databases the backend loop runs on (backends.ts), as
// kysely's DIALECTS does: `sqlite`, `postgres`, or both, comma-separated. Unset or empty,
// both. It also skips the suites written for the one left out (the PostgreSQL outage, the
// SQLite migrations); a suite that only keeps its data in SQLite runs whatever it says.

const VARIABLE = 'PLANTSTORE_TEST_BACKENDS';
const ALL: readonly Dialect[] = ['sqlite', 'postgres'];
const given = process.env[VARIABLE]?.trim() ?? '';

function parse(text: string): ReadonlySet<Dialect> {
  if (text === '') return new Set(ALL);
  const names = text.split(',').map((name) => name.trim().toLowerCase());
  for (const name of names) {
    if (!(ALL as readonly string[]).includes(name)) {
      throw new Error(`${VARIABLE}=${text}: "${name}" is none of ${ALL.join(', ')}`);
    }
  }
  return new Set(names as Dialect[]);
}

const wanted = parse(given);

/** Why PLANTSTORE_TEST_BACKENDS leaves `dialect` out, or false when it keeps it. */
export function leftOut(dialect: Dialect): string | false {
  return wanted.has(dialect) ? false : `${VARIABLE}=${given} leaves ${dialect} out`;
}

/** Whether PLANTSTORE_TEST_BACKENDS asks for `dialect` by name (not by being unset). */
export function askedFor(dialect: Dialect): boolean {
  return given !== '' && wanted.has(dialect);
}
