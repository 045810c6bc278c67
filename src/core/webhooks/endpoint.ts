import type { DeliveryStatus, WebhookEvent } from './events.js';

/** How long a rotated-out secret keeps signing beside the new one. */
export const SECRET_OVERLAP_MS = 24 * 3_600_000;

/** Bounds of the subscription API, published in the OpenAPI document. */
export const WEBHOOK_LIMITS = {
  urlMaxLength: 2048,
  descriptionMaxLength: 500,
  listDefault: 100,
  listMax: 1000,
} as const;

/**
 * Why an endpoint is disabled: a PATCH asked, its receiver answered `410 Gone`, or it did
 * nothing but fail for `--webhook-disable-after`.
 */
export const DISABLED_REASONS = ['request', 'gone', 'failing'] as const;
export type DisabledReason = (typeof DISABLED_REASONS)[number];

/** An endpoint as the API shows it; its secret is never part of it. */
export interface WebhookEndpoint {
  id: bigint;
  url: string;
  events: WebhookEvent[];
  /** Absent when none was given. */
  description?: string;
  enabled: boolean;
  /** Why it is disabled; absent while enabled, or if disabled before the reason was kept. */
  disabledReason?: DisabledReason;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewWebhookEndpoint {
  url: string;
  events: WebhookEvent[];
  description?: string;
  /** `whsec_...`, made by the service. */
  secret: string;
  at: Date;
}

/** A merge patch of an endpoint: absent fields are left alone, `description: null` removes. */
export interface WebhookEndpointChange {
  url?: string;
  events?: WebhookEvent[];
  description?: string | null;
  enabled?: boolean;
}

/** Page of endpoints in ascending id order, ids greater than `after`. */
export interface WebhookEndpointQuery {
  limit: number;
  after?: bigint;
}

/** One attempt at sending a message, as the attempt log keeps it. */
export interface DeliveryAttempt {
  at: Date;
  durationMs: number;
  /** The answer's status; null when there was none (refused, timed out, unsafe address). */
  httpStatus: number | null;
  error: string | null;
  /** The first 1 KiB of the answer's body. */
  responseExcerpt: string;
}

/** A message to one endpoint with its attempts, oldest attempt first. */
export interface Delivery {
  id: bigint;
  webhookId: string;
  eventType: WebhookEvent;
  /** The exact JSON body sent. */
  payload: string;
  status: DeliveryStatus;
  createdAt: Date;
  /** When the next attempt is due; absent unless pending. */
  nextAttemptAt?: Date;
  attempts: DeliveryAttempt[];
}

/** Page of an endpoint's messages, newest first: ids smaller than `after`. */
export interface DeliveryQuery {
  endpointId: bigint;
  limit: number;
  after?: bigint;
  status?: DeliveryStatus;
}

/** The prefix of a signing secret; base64 of 32 random bytes follows it. */
export const SECRET_PREFIX = 'whsec_';
