import { ApiError } from '../core/errors.js';
import type { NewPlant, Plant, PlantChange, PlantQuery } from '../core/plant.js';
import { etagOf, type IfMatch, matches } from '../core/etag.js';
import {
  IdsExhaustedError,
  PlantChangedError,
  PlantExistsError,
  type PlantStore,
} from '../store/store.js';

export interface PlantPage {
  plants: Plant[];
  /** Cursor for the next page, when there may be one. */
  next?: bigint;
}

/** The plant operations of the API, in terms of the store and the error catalogue. */
export class PlantService {
  constructor(private readonly store: PlantStore) {}

  async create(input: NewPlant): Promise<Plant> {
    try {
      return await this.store.insert(input);
    } catch (error) {
      if (error instanceof PlantExistsError) {
        throw new ApiError('plantExists', `A plant with id ${error.id} already exists.`);
      }
      if (error instanceof IdsExhaustedError) throw new ApiError('idsExhausted');
      throw error;
    }
  }

  async get(id: bigint): Promise<Plant> {
    return (await this.store.get(id)) ?? notFound(id);
  }

  /** One page, ascending by id; `next` is set only when a further page exists. */
  async list(query: PlantQuery): Promise<PlantPage> {
    // One row more than asked tells whether another page exists, without a count.
    const rows = await this.store.list({ ...query, limit: query.limit + 1 });
    if (rows.length <= query.limit) return { plants: rows };
    const plants = rows.slice(0, query.limit);
    return { plants, next: plants.at(-1)!.id };
  }

  /** With `ifMatch`, only while the plant still has an entity tag the condition names. */
  async update(id: bigint, change: PlantChange, ifMatch?: IfMatch): Promise<Plant> {
    const expected = ifMatch && (await this.current(id, ifMatch));
    return (await unchanged(id, () => this.store.update(id, change, expected))) ?? notFound(id);
  }

  async delete(id: bigint, ifMatch?: IfMatch): Promise<void> {
    const expected = ifMatch && (await this.current(id, ifMatch));
    if (!(await unchanged(id, () => this.store.delete(id, expected)))) notFound(id);
  }

  /**
   * The plant a conditional write expects. A missing plant is 404 rather than 412: without
   * the condition the answer would not have been a success either (RFC 9110 §13.2.1).
   */
  private async current(id: bigint, ifMatch: IfMatch): Promise<Plant> {
    const plant = (await this.store.get(id)) ?? notFound(id);
    if (!matches(ifMatch, etagOf(plant))) throw preconditionFailed(id);
    return plant;
  }
}

/** Runs a conditional write; the plant changing between the check and the write is 412. */
async function unchanged<T>(id: bigint, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (error instanceof PlantChangedError) throw preconditionFailed(id);
    throw error;
  }
}

const preconditionFailed = (id: bigint) =>
  new ApiError(
    'preconditionFailed',
    `Plant ${id} has changed since the ETag given (If-Match); read it again.`,
  );

function notFound(id: bigint): never {
  throw new ApiError('plantNotFound', `No plant has id ${id}.`);
}
