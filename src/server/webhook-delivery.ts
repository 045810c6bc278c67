import { readFileSync } from 'node:fs';
import type { Log } from '../core/log.js';
import type { Metrics } from '../core/metrics.js';
import { AddressPolicy, type Network } from '../core/webhooks/address-policy.js';
import type { DestinationCheck } from '../core/webhooks/delivery.js';
import { destinationCheck, systemResolve } from '../outbound/destination.js';
import { HttpWebhookSender } from '../outbound/webhook-sender.js';
import { eventLoopBudget } from '../service/delivery-budget.js';
import { WebhookDispatcher } from '../service/webhook-dispatcher.js';
import { WebhookFanOut } from '../service/webhook-fanout.js';
import type { Store } from '../store/store.js';

/** How `serve` delivers webhooks (its --webhook-* options). */
export interface WebhookDelivery {
  timeoutMs: number;
  retryScheduleMs: readonly number[];
  allowNetworks: readonly Network[];
  disableAfterMs: number;
  retentionMs: number;
  /** Endpoints the store has at most (subscriptions past it are refused). */
  maxEndpoints: number;
}

/** `plantstore/<version>`, the user-agent of every webhook request. */
export function userAgent(): string {
  // ../../package.json from src/cli and from dist/cli alike.
  const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
  return `plantstore/${(JSON.parse(text) as { version: string }).version}`;
}

/** The subscription-time check, with the same networks open as for sending. */
export function webhookDestinations(
  delivery: Pick<WebhookDelivery, 'allowNetworks'>,
): DestinationCheck {
  return destinationCheck(new AddressPolicy(delivery.allowNetworks), systemResolve);
}

/**
 * A running fan-out, dispatcher and sender; `stop` ends them (see WebhookDispatcher.stop).
 */
export interface RunningDelivery {
  stop(graceMs: number): Promise<void>;
}

/**
 * Starts fanning out the events of plant writes into messages and delivering the queue's
 * messages from this process. Every `serve` process runs both (each worker of --workers,
 * each instance on one PostgreSQL): the events' locks keep them from fanning out the same
 * event twice, the queue's leases from sending the same attempt at once.
 */
export function startDelivery(
  store: Pick<Store, 'webhookEvents' | 'webhookQueue' | 'onRemoteMessages'>,
  delivery: WebhookDelivery,
  log: Log,
  metrics?: Metrics,
): RunningDelivery {
  const sender = new HttpWebhookSender({
    policy: new AddressPolicy(delivery.allowNetworks),
    timeoutMs: delivery.timeoutMs,
    userAgent: userAgent(),
  });
  const dispatcher = new WebhookDispatcher({
    queue: store.webhookQueue,
    wakeSources: store.onRemoteMessages === undefined ? [] : [store.onRemoteMessages.bind(store)],
    sender,
    log,
    timeoutMs: delivery.timeoutMs,
    schedule: delivery.retryScheduleMs,
    retentionMs: delivery.retentionMs,
    disableAfterMs: delivery.disableAfterMs,
    budget: eventLoopBudget(),
    ...(metrics && { metrics }),
  });
  const fanOut = new WebhookFanOut({ events: store.webhookEvents, log });
  fanOut.start();
  dispatcher.start();
  return {
    async stop(graceMs) {
      // Events not fanned out yet stay in the database for the next process to start.
      await Promise.all([fanOut.stop(), dispatcher.stop(graceMs)]);
      sender.close();
    },
  };
}
