import { type Log, silentLog } from '../core/log.js';
import type { WriteOrigin } from '../core/audit.js';
import { ApiError } from '../core/errors.js';
import { etagOf, type IfMatch, matches } from '../core/etag.js';
import { type ClaimedKey, fingerprintOf, type KeptAnswer } from '../core/idempotency.js';
import type { NewPlant, PlantChange, PlantQuery, StoredPlant } from '../core/plant.js';
import {
  IdsExhaustedError,
  type IdempotencyStore,
  KeyNotHeldError,
  PlantChangedError,
  PlantExistsError,
  type PlantListing,
  type PlantStore,
} from '../store/store.js';

/** A create's answer; `replayed` when it is the kept answer of an earlier request. */
export interface Created {
  plant: StoredPlant;
  replayed: boolean;
}

/** A write on behalf of a token, as the API makes them. */
export interface Writer extends WriteOrigin {
  tokenId: number;
}

export interface PlantServiceOptions {
  /** Dates the claims of idempotency keys, and so ages them; the wall clock by default. */
  now?: () => Date;
  log?: Log;
}

/** The plant operations of the API, in terms of the store and the error catalogue. */
export class PlantService {
  private readonly now: () => Date;
  private readonly log: Log;

  constructor(
    private readonly store: PlantStore,
    private readonly keys: IdempotencyStore,
    { now = () => new Date(), log = silentLog }: PlantServiceOptions = {},
  ) {
    this.now = now;
    this.log = log;
  }

  /**
   * With an Idempotency-Key (IETF httpapi draft): the first request with the key creates,
   * and every later one with the same body gets the first one's answer instead.
   */
  async create(input: NewPlant, by: Writer, idempotencyKey?: string): Promise<Created> {
    if (idempotencyKey === undefined) {
      return { plant: await this.insert(input, by), replayed: false };
    }
    const key: ClaimedKey = { tokenId: by.tokenId, key: idempotencyKey };
    const claim = { ...key, fingerprint: fingerprintOf(input), at: this.now() };
    // A key never seen and a create that succeeds, or a retry of one, as most are, take one
    // transaction; the other cases the long way, a claim first, which tells them apart.
    const first = await this.store.insertWithKey(input, { by, claim });
    if (first.state === 'created') return { plant: first.plant, replayed: false };
    const outcome = first.state === 'long-way' ? await this.keys.claim(claim) : first;
    switch (outcome.state) {
      case 'mismatch':
        throw new ApiError('idempotencyKeyReused');
      case 'in-flight':
        throw new ApiError('idempotencyKeyInFlight');
      case 'answered':
        return replay(outcome.answer);
      case 'claimed':
        return { plant: await this.insertClaimed(input, by, key), replayed: false };
    }
  }

  /** The create, settling the key with whatever answer it gets. */
  private async insertClaimed(input: NewPlant, by: Writer, key: ClaimedKey): Promise<StoredPlant> {
    try {
      // On success the store settles the key in the create's own transaction.
      return await this.insert(input, by, key);
    } catch (error) {
      // Another request holds the key now (this one outlived its lease): leave it be.
      if (error instanceof KeyNotHeldError) {
        throw new ApiError('idempotencyKeyInFlight');
      }
      if (error instanceof ApiError) {
        // A refusal is the request's answer, and a retry gets it again. Should keeping it
        // fail, the key is freed instead: the refusal still stands.
        await this.keys
          .settle(key, { name: error.errorName, message: error.message })
          .catch((settling: unknown) => {
            this.log.warn({ err: settling }, 'refusal not kept for its Idempotency-Key');
            return this.freeKey(key);
          });
      } else {
        // No definite answer (the database failed): the create may be retried for real.
        await this.freeKey(key);
      }
      throw error;
    }
  }

  /** Frees a key for a retry; should that fail too, its lease frees it within a minute. */
  private async freeKey(key: ClaimedKey): Promise<void> {
    await this.keys.release(key).catch((error: unknown) => {
      this.log.warn({ err: error }, 'Idempotency-Key not freed; its lease will free it');
    });
  }

  private async insert(
    input: NewPlant,
    by: Writer,
    idempotencyKey?: ClaimedKey,
  ): Promise<StoredPlant> {
    try {
      return await this.store.insert(input, { by, ...(idempotencyKey && { idempotencyKey }) });
    } catch (error) {
      if (error instanceof PlantExistsError) {
        throw new ApiError('plantExists', `A plant with id ${error.id} already exists.`);
      }
      if (error instanceof IdsExhaustedError) throw new ApiError('idsExhausted');
      throw error;
    }
  }

  /** The plant; at once, not as a promise, when the store answers at once (SQLite). */
  get(id: bigint): StoredPlant | Promise<StoredPlant> {
    const found = this.store.get(id);
    return found instanceof Promise
      ? found.then((plant) => plant ?? notFound(id))
      : (found ?? notFound(id));
  }

  /** One page, ascending by id, as its answer's JSON text (see PlantListing). */
  list(query: PlantQuery): Promise<PlantListing> {
    return this.store.list(query);
  }

  /**
   * With `ifMatch`, only while the plant still has an entity tag the condition names. An
   * empty change writes nothing, so leaves no audit entry: it answers the plant as it is.
   */
  async update(
    id: bigint,
    change: PlantChange,
    by: Writer,
    ifMatch?: IfMatch,
  ): Promise<StoredPlant> {
    if (change.name === undefined && change.tag === undefined) {
      return ifMatch ? this.current(id, ifMatch) : this.get(id);
    }
    const expected = ifMatch && (await this.current(id, ifMatch));
    const write = () => this.store.update(id, change, { by, ...(expected && { expected }) });
    return (await unchanged(id, write)) ?? notFound(id);
  }

  async delete(id: bigint, by: Writer, ifMatch?: IfMatch): Promise<void> {
    const expected = ifMatch && (await this.current(id, ifMatch));
    const write = () => this.store.delete(id, { by, ...(expected && { expected }) });
    if (!(await unchanged(id, write))) notFound(id);
  }

  /**
   * The plant a conditional write expects. A missing plant is 404 rather than 412: without
   * the condition the answer would not have been a success either (RFC 9110 §13.2.1).
   */
  private async current(id: bigint, ifMatch: IfMatch): Promise<StoredPlant> {
    const plant = (await this.store.get(id)) ?? notFound(id);
    const etag = etagOf(plant);
    if (!matches(ifMatch, etag)) throw preconditionFailed(id, ifMatch, etag);
    return plant;
  }
}

/** The answer kept for a key, given again, and marked as such. */
function replay(answer: KeptAnswer): Created {
  if ('plant' in answer) return { plant: answer.plant, replayed: true };
  throw new ApiError(answer.refusal.name, answer.refusal.message, {}, { replayed: true });
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

const preconditionFailed = (id: bigint, ifMatch?: IfMatch, etag?: string) =>
  new ApiError(
    'preconditionFailed',
    // A weak tag never matches (RFC 9110 §13.1.1): given for the current one, the plant has
    // not changed, and "read it again" would not help.
    ifMatch !== undefined && !ifMatch.any && ifMatch.tags.includes(`W/${etag}`)
      ? `If-Match compares entity tags strongly, and a weak one (W/"...") never matches: send plant ${id}'s ETag as it was given.`
      : `Plant ${id} has changed since the ETag given (If-Match); read it again.`,
  );

function notFound(id: bigint): never {
  throw new ApiError('plantNotFound', `No plant has id ${id}.`);
}
