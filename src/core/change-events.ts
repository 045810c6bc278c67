import type { WebhookEvent } from './webhooks/events.js';

/**
 * One entry of the changes feed (GET /events): a plant write, at its place in the one order
 * every reader sees. `data` is the body of the webhook message of the same change, the exact
 * JSON of the plant (as created, as updated, as it was before a delete), ids as exact
 * integers.
 */
export interface ChangeEvent {
  /** Where the event stands in the log: every event a reader finds later is above it. */
  position: bigint;
  type: WebhookEvent;
  /** When the write ran. */
  at: Date;
  /** The plant as exact JSON text (see webhooks/events.ts, plantPayload). */
  data: string;
}

/** The bounds of the feed: published in docs/events.md and the OpenAPI document. */
export const EVENT_LIMITS = {
  pageDefault: 100,
  pageMax: 1000,
  /** The longest `?wait=` of a long poll, in seconds. */
  waitMaxSeconds: 60,
  /** A comment line on an idle stream this often, so that proxies keep it open. */
  heartbeatMs: 15_000,
  /** How often an open stream checks that its token is still usable (not revoked, expired). */
  tokenCheckMs: 5_000,
  /** `--events-retention`'s default: a week. */
  retentionMs: 7 * 86_400_000,
  /** `--max-event-streams`' default: a quarter of the connections a process accepts. */
  maxStreams: 1024,
} as const;

/**
 * `?wait=30s`: the seconds a long poll waits for an event, `1s` to `60s`; undefined for
 * anything else (the query's schema refuses it first).
 */
export function parseWait(text: string): number | undefined {
  const match = /^([1-9][0-9]?)s$/.exec(text);
  const seconds = match === null ? NaN : Number(match[1]);
  return seconds <= EVENT_LIMITS.waitMaxSeconds ? seconds : undefined;
}
