import type { WebhookEvent } from './events.js';
import { nextAttemptAt } from './retry-schedule.js';

/**
 * What the dispatcher (service) and the sender (outbound) say to each other: one signed
 * message to send, and what came of it. The sender owns the wire (headers, sockets); the
 * dispatcher owns the decisions.
 */

/** One attempt's message, signed, ready to go on the wire. */
export interface OutboundMessage {
  url: string;
  /** `msg_...`, the same on every attempt. */
  messageId: string;
  eventType: WebhookEvent;
  /** Unix seconds of this attempt, as signed. */
  timestamp: number;
  /** `v1,<base64>`, space-separated when two secrets sign. */
  signature: string;
  body: string;
}

/** What one attempt came to. */
export interface SendOutcome {
  /** The answer's status; null when there was none. */
  status: number | null;
  /** Why the attempt failed without an answer, or what was wrong with the answer. */
  error: string | null;
  durationMs: number;
  /** The first 1 KiB of the answer's body. */
  excerpt: string;
  /** A receiver's Retry-After on 429 or 503, in milliseconds; null otherwise. */
  retryAfterMs: number | null;
  /**
   * True when the attempt was given up because the process is stopping: nothing is
   * recorded, the message is left to its lease.
   */
  abandoned?: boolean;
}

/** Sends one message; never rejects (every failure is an outcome). */
export interface WebhookSender {
  send(message: OutboundMessage, signal?: AbortSignal): Promise<SendOutcome>;
}

/**
 * Whether a destination URL may be subscribed: refused with a sentence when it is not an
 * `http`/`https` URL without credentials, or when its host resolves to an address the
 * address policy refuses.
 */
export type DestinationCheck = (
  url: string,
) => Promise<{ ok: true } | { ok: false; reason: string }>;

/** The same meaning as the store's NextStep, so a decision can be handed to it as it is. */
export type AttemptConsequence =
  { kind: 'delivered' } | { kind: 'retry'; at: Date } | { kind: 'failed' } | { kind: 'gone' };

export const GONE = 410;
/** The statuses whose Retry-After is obeyed (RFC 9110 §10.2.3 names 503; 429 is RFC 6585). */
export const RETRY_AFTER_STATUSES: ReadonlySet<number> = new Set([429, 503]);

/**
 * What becomes of a message after its `attempt`-th attempt: any 2xx is delivered, 410
 * disables the endpoint, anything else (another status, a redirect, no answer) is tried
 * again per the schedule, or failed after the last attempt.
 */
export function consequenceOf(
  outcome: SendOutcome,
  attempt: number,
  schedule: readonly number[],
  now: Date,
  random: () => number = Math.random,
): AttemptConsequence {
  const { status } = outcome;
  if (status !== null && status >= 200 && status < 300) return { kind: 'delivered' };
  if (status === GONE) return { kind: 'gone' };
  const at = nextAttemptAt(schedule, { attempt, now, retryAfterMs: outcome.retryAfterMs }, random);
  return at === null ? { kind: 'failed' } : { kind: 'retry', at };
}

/**
 * Refuses what may never be a webhook URL, before any name is resolved: other schemes
 * than http and https, credentials in the URL, port 0, and anything that does not parse.
 * Answers the reason, or undefined when the URL may go on to the address check.
 */
export function urlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'the webhook URL is not an absolute URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return 'the webhook URL must be http or https';
  }
  if (url.username !== '' || url.password !== '') {
    return 'the webhook URL may not carry credentials (user:password@)';
  }
  if (url.hostname === '') return 'the webhook URL has no host';
  // No server can listen on port 0: a connection there fails every time, so every message
  // would end failed for good instead of the mistake being told at once.
  if (url.port === '0') return 'the webhook URL may not name port 0';
  return undefined;
}
