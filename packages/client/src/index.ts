// plantstore/client: a TypeScript client of the plant store API in which every int64 is a
// `bigint` end to end. Types are generated from the served OpenAPI document (schema.d.ts);
// bodies are parsed and written with lossless-json, so no id passes through a JS number.
import { Requests } from './client.js';
import { events, type EventsOptions, type FeedEvent } from './events.js';
import { Plants } from './plants.js';
import type { ClientOptions } from './transport.js';

export {
  PlantstoreError,
  parseRateLimit,
  parseRateLimitPolicy,
  parseRetryAfter,
} from './errors.js';
export type { ErrorBody, ErrorCode, RateLimitPolicy, RateLimitState } from './errors.js';
export type { Page, OptionsArg } from './client.js';
export type { ListQuery, NewPlant, Plant, PlantPatch } from './plants.js';
export type { ChangeEvent, EventsOptions, FeedEvent } from './events.js';
export type { ClientOptions } from './transport.js';
export type * from './types.js';
export type { components, operations, paths } from './schema.js';
export { parseBody, stringifyBody } from './json.js';
export { nextLink } from './links.js';

/** A client of one plant store server. */
export class PlantstoreClient extends Requests {
  readonly plants: Plants;

  constructor(options: ClientOptions) {
    super(options);
    this.plants = new Plants(this);
  }

  /**
   * The changes feed (GET /events, scope `events:read`): every plant change after
   * `options.after` (`'now'`: the changes to come), in order, each once, resuming by itself
   * after a lost connection or a server that shuts down; ids and positions as bigints. Ends
   * only with `options.signal` or a PlantstoreError it cannot get past (`410`: read the plants
   * again and follow from there).
   *
   * @example
   * for await (const event of client.events({ after: 41n })) console.log(event.type, event.data.id);
   */
  events(options?: EventsOptions): AsyncGenerator<FeedEvent, void, undefined> {
    return events(this, options);
  }
}

/**
 * A client of the server at `options.baseUrl`.
 *
 * @example
 * const client = createClient({ baseUrl: 'http://127.0.0.1:8080', token: process.env.TOKEN });
 * const plant = await client.plants.create({ id: 9007199254740993n, name: 'Big fern' });
 */
export function createClient(options: ClientOptions): PlantstoreClient {
  return new PlantstoreClient(options);
}
