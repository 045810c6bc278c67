/** What the helpers that make databases and directories need of a test: its clean-ups. */
export interface Cleanups {
  after(fn: () => unknown): void;
}

/**
 * Runs `work` with clean-ups of its own, run when it ends (in the order they were added, as
 * node:test runs a test's), not when the test does. For a property whose every run needs a
 * database of its own: a run's PostgreSQL schema is given back as it ends, and the next run
 * takes it back reset (migrated-schemas.ts) instead of migrating a new one.
 */
export async function withCleanups<T>(work: (scope: Cleanups) => Promise<T>): Promise<T> {
  const hooks: Array<() => unknown> = [];
  try {
    return await work({ after: (fn) => void hooks.push(fn) });
  } finally {
    for (const hook of hooks) await hook();
  }
}
