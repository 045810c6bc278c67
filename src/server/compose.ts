import type { FastifyInstance } from 'fastify';
import type { Log } from '../core/log.js';
import { DEFAULT_RATE_LIMITS, type RateLimitOptions } from '../core/rate-limit.js';
import { type AppOptions, type AppServices, buildApp } from '../http/app.js';
import { PlantService } from '../service/plant-service.js';
import { rateLimitCounts, RateLimitSync } from '../service/rate-limit-sync.js';
import { TokenService } from '../service/token-service.js';
import type { Store } from '../store/store.js';
import { AddressPolicy } from '../core/webhooks/address-policy.js';
import type { DestinationCheck } from '../core/webhooks/delivery.js';
import { destinationCheck, systemResolve } from '../outbound/destination.js';
import { WebhookService } from '../service/webhook-service.js';
import { EventFeed, type EventFeedOptions } from '../service/event-feed.js';

export interface ComposeOptions extends Omit<AppOptions, keyof AppServices> {
  store: Store;
  /** Defaults to DEFAULT_RATE_LIMITS. */
  rateLimits?: RateLimitOptions;
  /**
   * Which webhook URLs may be subscribed; defaults to public addresses only (the networks
   * of --webhook-allow-networks are added by the caller).
   */
  webhookDestinations?: DestinationCheck;
  /** Webhook endpoints the store has at most; defaults to DEFAULT_MAX_ENDPOINTS. */
  webhookMaxEndpoints?: number;
  /** The changes feed's bounds: streams at once, the heartbeat (tests shorten it). */
  events?: Omit<EventFeedOptions, 'log'>;
  /** Overrides UNSEEN_TOKEN_LOOKUPS_MAX and UNSEEN_TOKEN_LOOKUPS_WAITING (tests). */
  unseenTokenLookups?: { running: number; waiting: number };
}

/**
 * A Log that writes through whatever logger `current` returns when a line is written:
 * the services are built before the app whose logger they share.
 */
export function laterLog(current: () => Log | undefined): Log {
  return {
    error: (fields, message) => current()?.error(fields, message),
    warn: (fields, message) => current()?.warn(fields, message),
    info: (fields, message) => current()?.info(fields, message),
  };
}

/**
 * The application wired to an open store: the services over it, the rate-limit counts and
 * their sync with the other instances (started when the app is ready, stopped when it
 * closes), and the readiness probe. The caller opens and closes the store.
 */
export function composeApp({
  store,
  rateLimits = DEFAULT_RATE_LIMITS,
  webhookDestinations = destinationCheck(new AddressPolicy(), systemResolve),
  webhookMaxEndpoints,
  events: eventOptions,
  unseenTokenLookups,
  ...options
}: ComposeOptions): FastifyInstance {
  // Nothing logs while the app is being built, so `app` is set before the first line.
  const log = laterLog(() => app.log);
  const counts = rateLimitCounts(rateLimits);
  // One clock for the whole app: a test that moves it sees tokens expire, cached
  // revocations lapse and idempotency keys age, as well as rate-limit windows end.
  const { now } = options;
  const clock = now && { now: () => new Date(now()) };
  const app = buildApp({
    ...options,
    plants: new PlantService(store.plants, store.idempotency, { ...clock, log }),
    tokens: new TokenService(store.tokens, {
      ...clock,
      log,
      ...(unseenTokenLookups && {
        unseenLookupsMax: unseenTokenLookups.running,
        unseenLookupsWaiting: unseenTokenLookups.waiting,
      }),
    }),
    webhooks: new WebhookService(store.webhooks, {
      ...clock,
      checkDestination: webhookDestinations,
      maxEndpoints: webhookMaxEndpoints,
    }),
    events: new EventFeed(store.events, {
      ...eventOptions,
      ...(options.metrics && { metrics: options.metrics }),
      ...(store.events.settle && { settle: store.events.settle.bind(store.events) }),
      log,
    }),
    rateLimitCounts: counts,
    ready: () => store.ping(),
  });
  if (counts.tokens !== undefined || counts.addresses !== undefined) {
    const sync = new RateLimitSync(counts, store.rateLimits, log, now);
    app.addHook('onReady', (done) => {
      sync.start();
      done();
    });
    app.addHook('onClose', (_app, done) => {
      sync.stop();
      done();
    });
  }
  return app;
}
