import type { Plant } from '../core/plant.js';
import { isScope, type Scope } from '../core/scopes.js';

// Row mapping both adapters share: a plant row reads the same from SQLite (safe integers)
// and PostgreSQL (int8 parsed to bigint), and scopes are stored alike.

export interface PlantRow {
  id: bigint;
  name: string;
  tag: string | null;
}

export function toPlant(row: PlantRow): Plant {
  return row.tag === null
    ? { id: row.id, name: row.name }
    : { id: row.id, name: row.name, tag: row.tag };
}

/** Scopes as stored (space-separated). Unknown ones (from a newer version) are dropped. */
export const scopesFromText = (text: string): Scope[] => text.split(' ').filter(isScope);
