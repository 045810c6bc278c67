import { Option } from 'commander';
import { parseDuration } from '../core/tokens.js';
import { type Network, parseNetworks } from '../core/webhooks/address-policy.js';
import {
  DEFAULT_RETRY_SCHEDULE_MS,
  formatDelay,
  parseRetrySchedule,
} from '../core/webhooks/retry-schedule.js';
import { DISPATCH_DEFAULTS } from '../service/webhook-dispatcher.js';
import { DEFAULT_MAX_ENDPOINTS } from '../service/webhook-service.js';
import { argument, positiveInteger } from './options.js';

/** The `serve` options of webhook delivery, as commander parses them. */
export interface WebhookCommandOptions {
  webhookTimeout: number;
  webhookRetrySchedule: number[];
  webhookAllowNetworks: Network[];
  webhookDisableAfter: number;
  webhookRetention: number;
  webhookMaxEndpoints: number;
}

/** The most --webhook-max-endpoints takes: each event is fanned out to every endpoint. */
export const WEBHOOK_MAX_ENDPOINTS_LIMIT = 10_000;

export const WEBHOOK_TIMEOUT_MS = 15_000;
const WEBHOOK_TIMEOUT_MAX_MS = 300_000;

const bounded = (what: string, min: number, max: number) =>
  argument((text) => {
    const ms = parseDuration(text);
    if (ms < min || ms > max) {
      throw new Error(
        `"${text}" is out of range for ${what} (${formatDelay(min)} to ${formatDelay(max)})`,
      );
    }
    return ms;
  });

/** The six options of `serve`, each made anew for the command that takes it. */
export const webhookOptions = {
  timeout: () =>
    new Option(
      '--webhook-timeout <duration>',
      'a webhook attempt, connection to answer, must end within this',
    )
      .env('PLANTSTORE_WEBHOOK_TIMEOUT')
      .default(WEBHOOK_TIMEOUT_MS, formatDelay(WEBHOOK_TIMEOUT_MS))
      .argParser(bounded('--webhook-timeout', 1000, WEBHOOK_TIMEOUT_MAX_MS)),
  retrySchedule: () =>
    new Option(
      '--webhook-retry-schedule <delays>',
      'delays before each further attempt of a failed webhook message, comma-separated',
    )
      .env('PLANTSTORE_WEBHOOK_RETRY_SCHEDULE')
      .default([...DEFAULT_RETRY_SCHEDULE_MS], DEFAULT_RETRY_SCHEDULE_MS.map(formatDelay).join(','))
      .argParser(argument(parseRetrySchedule)),
  allowNetworks: () =>
    new Option(
      '--webhook-allow-networks <cidrs>',
      'networks webhooks may reach besides public addresses (127.0.0.0/8,::1/128,10.0.0.0/8)',
    )
      .env('PLANTSTORE_WEBHOOK_ALLOW_NETWORKS')
      .default([], 'none')
      .argParser(argument(parseNetworks)),
  disableAfter: () =>
    new Option(
      '--webhook-disable-after <duration>',
      'disable a webhook endpoint whose attempts have all failed for this long',
    )
      .env('PLANTSTORE_WEBHOOK_DISABLE_AFTER')
      .default(DISPATCH_DEFAULTS.disableAfterMs, formatDelay(DISPATCH_DEFAULTS.disableAfterMs))
      .argParser(bounded('--webhook-disable-after', 60_000, 365 * 86_400_000)),
  retention: () =>
    new Option(
      '--webhook-retention <duration>',
      'delivered and failed webhook messages are deleted this long after they ended',
    )
      .env('PLANTSTORE_WEBHOOK_RETENTION')
      .default(DISPATCH_DEFAULTS.retentionMs, formatDelay(DISPATCH_DEFAULTS.retentionMs))
      .argParser(bounded('--webhook-retention', 60_000, 10 * 365 * 86_400_000)),
  maxEndpoints: () =>
    new Option(
      '--webhook-max-endpoints <n>',
      'webhook endpoints the store has at most; POST /webhooks past it answers 409 (40904)',
    )
      .env('PLANTSTORE_WEBHOOK_MAX_ENDPOINTS')
      .default(DEFAULT_MAX_ENDPOINTS)
      .argParser(positiveInteger('webhook endpoints', WEBHOOK_MAX_ENDPOINTS_LIMIT)),
};
