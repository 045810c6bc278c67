import type { Plant } from '../plant.js';

/** The kinds of message an endpoint can subscribe to, one per kind of plant change. */
export const WEBHOOK_EVENTS = ['plant.created', 'plant.updated', 'plant.deleted'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** What a subscription gets when it names no events: the sample's one webhook. */
export const DEFAULT_WEBHOOK_EVENTS: readonly WebhookEvent[] = ['plant.created'];

export function isWebhookEvent(value: string): value is WebhookEvent {
  return (WEBHOOK_EVENTS as readonly string[]).includes(value);
}

/** Where a message stands: still to be sent (again), received, or given up on. */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/**
 * The body of every message: the plant itself, as the sample's `/plant/webhook` sends it
 * (no envelope, `tag` absent when none). Written here rather than with JSON.stringify so
 * that the id stays an exact JSON integer at any int64 value.
 */
export function plantPayload(plant: Plant): string {
  return plantText(plant.id.toString(), plant.name, plant.tag);
}

/**
 * The same text from a plant's fields as a database row has them, the id as its decimal
 * digits (a page of plants is written from its rows without a bigint for each id).
 */
export function plantText(idDigits: string, name: string, tag: string | null | undefined): string {
  const tagged = tag === undefined || tag === null ? '' : `,"tag":${JSON.stringify(tag)}`;
  return `{"id":${idDigits},"name":${JSON.stringify(name)}${tagged}}`;
}
