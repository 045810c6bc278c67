import type { Log } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import {
  type AttemptConsequence,
  consequenceOf,
  type SendOutcome,
  type WebhookSender,
} from '../core/webhooks/delivery.js';
import { signatureHeader } from '../core/webhooks/signature.js';
import type { AttemptRecord, ClaimedMessage, WebhookQueue } from '../store/store.js';

/** What one attempt needs besides its message. */
export interface AttemptContext {
  queue: WebhookQueue;
  sender: WebhookSender;
  log: Log;
  schedule: readonly number[];
  now: () => Date;
  random: () => number;
  /** Aborted when the process stops: the attempt is then left to its lease. */
  signal: AbortSignal;
  metrics: Metrics;
}

/**
 * Makes one attempt at a claimed message and records it under the claim's lease: signs it
 * with every secret the endpoint has (two during a rotation), sends it, decides what
 * comes next (core/webhooks/delivery.ts) and hands both to the queue. Never rejects;
 * answers what came next (whether or not the database recorded it), or 'abandoned' when the
 * process stopped it mid-way and nothing was recorded (the message is then sent again, with
 * the same webhook-id: at-least-once).
 */
export async function attempt(
  message: ClaimedMessage,
  context: AttemptContext,
): Promise<AttemptConsequence['kind'] | 'abandoned'> {
  const at = context.now();
  const outcome = await send(message, at, context);
  if (outcome.abandoned === true) return 'abandoned';
  const next = consequenceOf(
    outcome,
    message.attempt,
    context.schedule,
    context.now(),
    context.random,
  );
  const record: AttemptRecord = {
    at,
    durationMs: outcome.durationMs,
    httpStatus: outcome.status,
    error: outcome.error,
    responseExcerpt: outcome.excerpt,
  };
  try {
    const kept = await context.queue.finish(message.id, message.claimedUntil, record, next);
    report(message, outcome, next, kept, context.log);
    const ended = context.now().getTime();
    context.metrics.webhookAttempt(
      kept ? next.kind : 'lease-lost',
      (ended - message.createdAt.getTime()) / 1000,
      outcome.durationMs / 1000,
    );
  } catch (error) {
    // The lease runs out and the message is sent again: a duplicate, never a loss.
    context.log.error(
      { err: error, message: message.webhookId },
      'webhook attempt not recorded; it will be made again when its lease ends',
    );
  }
  return next.kind;
}

async function send(
  message: ClaimedMessage,
  at: Date,
  context: AttemptContext,
): Promise<SendOutcome> {
  const timestamp = Math.floor(at.getTime() / 1000);
  let signature: string;
  try {
    signature = signatureHeader(
      message.endpoint.secrets,
      message.webhookId,
      timestamp,
      message.payload,
    );
  } catch (error) {
    return {
      status: null,
      error: `not sent: ${(error as Error).message}`,
      durationMs: 0,
      excerpt: '',
      retryAfterMs: null,
    };
  }
  return await context.sender.send(
    {
      url: message.endpoint.url,
      messageId: message.webhookId,
      eventType: message.eventType,
      timestamp,
      signature,
      body: message.payload,
    },
    context.signal,
  );
}

/** One log line per attempt that did not deliver; deliveries are in the attempt log. */
function report(
  message: ClaimedMessage,
  outcome: SendOutcome,
  next: AttemptConsequence,
  kept: boolean,
  log: Log,
): void {
  const fields = {
    message: message.webhookId,
    endpoint: message.endpoint.id.toString(),
    attempt: message.attempt,
    status: outcome.status,
    error: outcome.error,
  };
  if (!kept) {
    log.warn(fields, 'webhook attempt made after its lease ended; another process owns it now');
  } else if (next.kind === 'gone') {
    log.warn(fields, 'webhook endpoint answered 410 Gone and is disabled');
  } else if (next.kind === 'failed') {
    log.warn(fields, 'webhook message failed for good after its last attempt');
  } else if (next.kind === 'retry') {
    log.info({ ...fields, retryAt: next.at.toISOString() }, 'webhook attempt failed; will retry');
  }
}
