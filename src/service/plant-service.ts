import { ApiError } from '../core/errors.js';
import type { NewPlant, Plant, PlantChange, PlantQuery } from '../core/plant.js';
import { IdsExhaustedError, PlantExistsError, type PlantStore } from '../store/store.js';

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

  async update(id: bigint, change: PlantChange): Promise<Plant> {
    return (await this.store.update(id, change)) ?? notFound(id);
  }

  async delete(id: bigint): Promise<void> {
    if (!(await this.store.delete(id))) notFound(id);
  }
}

function notFound(id: bigint): never {
  throw new ApiError('plantNotFound', `No plant has id ${id}.`);
}
