import assert from 'node:assert/strict';
import { parse } from 'lossless-json';
import type { Plant, PlantQuery } from '../../src/core/plant.js';
import { plantPayload } from '../../src/core/webhooks/events.js';
import type { PlantStore } from '../../src/store/store.js';

/**
 * The plants of a page the store lists (PlantListing), checking on the way that the database
 * wrote its JSON text exactly as plantPayload writes each plant, ids exact, and that `next`
 * is the last id exactly when a plant follows the page.
 */
export async function listed(plants: PlantStore, query: PlantQuery): Promise<Plant[]> {
  const page = await plants.list(query);
  const parsed = parse(page.json, null, (digits) => BigInt(digits)) as Plant[];
  assert.equal(page.json, `[${parsed.map(plantPayload).join(',')}]`, 'the page as JSON text');
  const last = parsed.at(-1)?.id;
  const follows =
    last !== undefined && (await plants.list({ ...query, after: last, limit: 1 })).json !== '[]';
  assert.equal(page.next, follows ? last : undefined, 'next: the last id when a plant follows');
  return parsed;
}
