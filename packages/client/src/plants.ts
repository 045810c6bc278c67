import type { Requests } from './client.js';
import type { components } from './schema.js';
import type { CommonOptions, QueryParams } from './types.js';

export type Plant = components['schemas']['Plant'];
export type NewPlant = components['schemas']['NewPlant'];
export type PlantPatch = components['schemas']['PlantPatch'];
export type ListQuery = NonNullable<QueryParams<import('./schema.js').operations['listPlants']>>;

type Options = Pick<CommonOptions, 'retry' | 'signal' | 'headers'>;

/** The plant operations, ids as bigints. Errors are thrown as PlantstoreError. */
export class Plants {
  constructor(private readonly requests: Requests) {}

  /**
   * Every plant in ascending id order (or those with `tag`), fetched a page at a time as the
   * loop asks, following the `Link` of each page.
   *
   * @example for await (const plant of client.plants.list({ tag: 'shade' })) console.log(plant.id);
   */
  async *list(
    query: ListQuery = {},
    options: Options = {},
  ): AsyncGenerator<Plant, void, undefined> {
    for await (const page of this.requests.pages('/plants', { ...options, query })) {
      yield* page.data;
    }
  }

  async get(id: bigint, options: Options = {}): Promise<Plant> {
    return (await this.requests.request('get', '/plants/{id}', { ...options, params: { id } }))
      .data;
  }

  /**
   * Creates a plant. With `retry`, a create without an `idempotencyKey` gets one made up, so
   * that a retry after a `503` cannot create it twice.
   */
  async create(
    plant: NewPlant,
    options: Options & { idempotencyKey?: string | true } = {},
  ): Promise<Plant> {
    const retry = options.retry ?? this.requests.options.retry;
    const idempotencyKey =
      options.idempotencyKey ?? ((retry?.attempts ?? 1) > 1 ? true : undefined);
    const answer = await this.requests.request('post', '/plants', {
      ...options,
      ...(idempotencyKey !== undefined && { idempotencyKey }),
      body: plant,
    });
    return answer.data;
  }

  /** Applies a JSON merge patch: absent fields are kept, `tag: null` removes the tag. */
  async update(
    id: bigint,
    patch: PlantPatch,
    options: Options & { ifMatch?: string } = {},
  ): Promise<Plant> {
    const answer = await this.requests.request('patch', '/plants/{id}', {
      ...options,
      params: { id },
      body: patch,
      contentType: 'application/merge-patch+json',
    });
    return answer.data;
  }

  async delete(id: bigint, options: Options & { ifMatch?: string } = {}): Promise<void> {
    await this.requests.request('delete', '/plants/{id}', { ...options, params: { id } });
  }
}
