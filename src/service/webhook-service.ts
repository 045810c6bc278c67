import { randomBytes } from 'node:crypto';
import { ApiError } from '../core/errors.js';
import {
  type Delivery,
  type DeliveryQuery,
  SECRET_OVERLAP_MS,
  SECRET_PREFIX,
  type WebhookEndpoint,
  type WebhookEndpointQuery,
} from '../core/webhooks/endpoint.js';
import type { DestinationCheck } from '../core/webhooks/delivery.js';
import { DEFAULT_WEBHOOK_EVENTS, type WebhookEvent } from '../core/webhooks/events.js';
import { WebhookEndpointLimitError, type WebhookStore } from '../store/store.js';

export interface NewSubscription {
  url: string;
  events?: WebhookEvent[];
  description?: string;
}

export interface SubscriptionPatch {
  url?: string;
  events?: WebhookEvent[];
  description?: string | null;
  enabled?: boolean;
}

/** An endpoint with its signing secret: the answer of a create or a rotation, and no other. */
export interface WithSecret {
  endpoint: WebhookEndpoint;
  secret: string;
}

export interface Page<T> {
  items: T[];
  /** Cursor of the next page, when there may be one. */
  next?: bigint;
}

/** 32 random bytes, as Standard Webhooks secrets are (24 to 64 allowed). */
const SECRET_BYTES = 32;

/**
 * Endpoints a store has at most unless `serve --webhook-max-endpoints` says otherwise: every
 * event is fanned out to each, so they bound the messages one write makes.
 */
export const DEFAULT_MAX_ENDPOINTS = 100;

export interface WebhookServiceOptions {
  /** Refuses URLs that are not http(s), carry credentials or resolve to a private address. */
  checkDestination: DestinationCheck;
  /** DEFAULT_MAX_ENDPOINTS by default. */
  maxEndpoints?: number;
  /** Dates endpoints, secret rotations and retries; the wall clock by default. */
  now?: () => Date;
  /** Makes the signing secrets; crypto's randomBytes by default. */
  random?: (size: number) => Uint8Array;
}

/** The webhook subscriptions of the API, in terms of the store and the error catalogue. */
export class WebhookService {
  private readonly checkDestination: DestinationCheck;
  private readonly maxEndpoints: number;
  private readonly now: () => Date;
  private readonly random: (size: number) => Uint8Array;

  constructor(
    private readonly store: WebhookStore,
    {
      checkDestination,
      maxEndpoints = DEFAULT_MAX_ENDPOINTS,
      now = () => new Date(),
      random = randomBytes,
    }: WebhookServiceOptions,
  ) {
    this.checkDestination = checkDestination;
    this.maxEndpoints = maxEndpoints;
    this.now = now;
    this.random = random;
  }

  async create({ url, events, description }: NewSubscription): Promise<WithSecret> {
    await this.check(url);
    const secret = this.newSecret();
    const endpoint = await this.store
      .create(
        {
          url,
          events: unique(events ?? DEFAULT_WEBHOOK_EVENTS),
          ...(description !== undefined && { description }),
          secret,
          at: this.now(),
        },
        this.maxEndpoints,
      )
      .catch((error: unknown) => {
        if (!(error instanceof WebhookEndpointLimitError)) throw error;
        throw new ApiError(
          'webhookLimitReached',
          `This store has ${error.max} webhook endpoints, the most it allows; delete one first.`,
        );
      });
    return { endpoint, secret };
  }

  async get(id: bigint): Promise<WebhookEndpoint> {
    return (await this.store.get(id)) ?? endpointNotFound(id);
  }

  async list(query: WebhookEndpointQuery): Promise<Page<WebhookEndpoint>> {
    return page(await this.store.list({ ...query, limit: query.limit + 1 }), query.limit);
  }

  /** A merge patch; an empty one writes nothing and answers the endpoint as it is. */
  async update(id: bigint, patch: SubscriptionPatch): Promise<WebhookEndpoint> {
    if (Object.values(patch).every((value) => value === undefined)) return this.get(id);
    if (patch.url !== undefined) await this.check(patch.url);
    const change = { ...patch, ...(patch.events && { events: unique(patch.events) }) };
    return (await this.store.update(id, change, this.now())) ?? endpointNotFound(id);
  }

  async delete(id: bigint): Promise<void> {
    if (!(await this.store.delete(id))) endpointNotFound(id);
  }

  /** A new secret; the one it replaces keeps signing beside it for SECRET_OVERLAP_MS. */
  async rotateSecret(id: bigint): Promise<WithSecret> {
    const secret = this.newSecret();
    const at = this.now();
    const until = new Date(at.getTime() + SECRET_OVERLAP_MS);
    const endpoint = await this.store.rotateSecret(id, secret, at, until);
    return { endpoint: endpoint ?? endpointNotFound(id), secret };
  }

  async deliveries(query: DeliveryQuery): Promise<Page<Delivery>> {
    await this.get(query.endpointId);
    const rows = await this.store.deliveries({ ...query, limit: query.limit + 1 });
    return page(rows, query.limit);
  }

  /** One more attempt, due now, whatever the message's state (failed for good too). */
  async retry(endpointId: bigint, deliveryId: bigint): Promise<void> {
    await this.get(endpointId);
    if (!(await this.store.retry(endpointId, deliveryId, this.now()))) {
      throw new ApiError(
        'deliveryNotFound',
        `Webhook endpoint ${endpointId} has no delivery with id ${deliveryId}.`,
      );
    }
  }

  private async check(url: string): Promise<void> {
    const verdict = await this.checkDestination(url);
    if (!verdict.ok)
      throw new ApiError('webhookUrlRefused', `The webhook URL is refused: ${verdict.reason}.`);
  }

  private newSecret(): string {
    return SECRET_PREFIX + Buffer.from(this.random(SECRET_BYTES)).toString('base64');
  }
}

/** One row more than asked tells whether another page exists, without a count. */
function page<T extends { id: bigint }>(rows: T[], limit: number): Page<T> {
  if (rows.length <= limit) return { items: rows };
  const items = rows.slice(0, limit);
  return { items, next: items.at(-1)!.id };
}

const unique = (events: readonly WebhookEvent[]): WebhookEvent[] => [...new Set(events)];

function endpointNotFound(id: bigint): never {
  throw new ApiError('webhookNotFound', `No webhook endpoint has id ${id}.`);
}
