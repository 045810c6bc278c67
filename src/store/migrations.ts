import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Schema migrations, one folder per database under `migrations/`: the same version
 * numbers in both, so a version means the same schema whichever database holds it.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export type Dialect = 'sqlite' | 'postgres';

const MIGRATION_FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** Reads `migrations/<dialect>/NNNN_name.sql` from the package, in version order. */
export function loadMigrations(dialect: Dialect): Migration[] {
  const dir = fileURLToPath(new URL(`../../migrations/${dialect}/`, import.meta.url));
  return readdirSync(dir)
    .flatMap((file) => {
      const match = MIGRATION_FILE.exec(file);
      if (match === null) return [];
      const sql = readFileSync(dir + file, 'utf8');
      return [{ version: Number(match[1]), name: match[2]!, sql }];
    })
    .sort((a, b) => a.version - b.version);
}

/** Refuses a database whose schema a newer plantstore has migrated past what this one knows. */
export function assertNotNewer(applied: number, migrations: Migration[]): void {
  const known = migrations.at(-1)?.version ?? 0;
  if (applied > known) {
    throw new Error(
      `the database schema is at version ${applied}, newer than this plantstore knows (${known}); upgrade plantstore`,
    );
  }
}

/**
 * What a migration run did: the schema version before it (0: the database had no schema,
 * so this run created it) and after it, and the versions it applied.
 */
export interface MigrationReport {
  from: number;
  version: number;
  applied: number[];
}

/**
 * Opened with `create: false`, the database holds no plantstore schema, or there is no
 * database at all: a command that only reads must not make one where a path was mistyped.
 */
export class NoDatabaseError extends Error {
  constructor(where: string) {
    super(`no plantstore database ${where}`);
    this.name = 'NoDatabaseError';
  }
}
