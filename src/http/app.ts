import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyServerOptions,
} from 'fastify';
import type { Metrics } from '../core/metrics.js';
import type { PlantService } from '../service/plant-service.js';
import type { RateLimitCounts } from '../service/rate-limit-sync.js';
import type { TokenService } from '../service/token-service.js';
import type { WebhookService } from '../service/webhook-service.js';
import type { EventFeed } from '../service/event-feed.js';
import { authenticate } from './hooks/auth.js';
import { registerJsonParsers } from './hooks/body.js';
import { installErrorHandling, sendError, toApiError } from './errors/error-reply.js';
import { corsPolicy } from './hooks/cors.js';
import type { CorsOrigins } from '../api/cors-origins.js';
import {
  BODY_LIMIT,
  HEADER_SECTION_LIMIT,
  HEADERS_TIMEOUT_MS,
  IN_FLIGHT_PER_CONNECTION,
  IN_FLIGHT_PER_TOKEN,
  KEEP_ALIVE_TIMEOUT_MS,
  MAX_CONNECTIONS,
  PIPELINED_PER_CONNECTION,
  REQUEST_TIMEOUT_MS,
  SEND_TIMEOUT_MS,
  SHUTDOWN_SEND_TIMEOUT_MS,
} from '../api/limits.js';
import { ConnectionGuard } from './connections.js';
import { clientErrorHandler } from './errors/raw-errors.js';
import { endJsonBodiesWithNewline, withFinalNewline } from './hooks/json-newline.js';
import { installRequestChecks } from './hooks/checks.js';
import { TokenRequests } from './hooks/in-flight.js';
import { rateLimits } from './hooks/rate-limit.js';
import { lazyChildLogger, RequestLog, type RequestLineWriter } from './hooks/request-log.js';
import { SECURITY_HEADERS } from '../api/security-headers.js';
import { plantRoutes } from './routes/plants.js';
import { webhookRoutes } from './routes/webhooks/index.js';
import { eventRoutes } from './routes/events.js';
import { systemRoutes } from './routes/system.js';
import { validatorCompiler } from './validation.js';

/** What the app serves with, built by its caller (src/server/compose.ts). */
export interface AppServices {
  plants: PlantService;
  webhooks: WebhookService;
  tokens: TokenService;
  /** The changes feed (GET /events); closed when the app closes. */
  events: EventFeed;
  /** What the rate limits count in; a limit turned off has no counts. */
  rateLimitCounts: RateLimitCounts;
  /** Resolves when the database answers; `/readyz` is 200 then, 503 otherwise. */
  ready: () => Promise<void>;
}

export interface AppOptions extends AppServices {
  /** Pino options (or false for silence); the Authorization header is always redacted. */
  logger?: FastifyServerOptions['logger'] | FastifyBaseLogger;
  /** Overrides REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  /** Overrides HEADERS_TIMEOUT_MS; capped at the request timeout. */
  headersTimeoutMs?: number;
  /** Overrides KEEP_ALIVE_TIMEOUT_MS. */
  keepAliveTimeoutMs?: number;
  /** Overrides SEND_TIMEOUT_MS. */
  sendTimeoutMs?: number;
  /** Origins whose pages may call the API; CORS is off when absent or empty. */
  corsOrigins?: CorsOrigins;
  /** Overrides MAX_CONNECTIONS. */
  maxConnections?: number;
  /** Overrides IN_FLIGHT_PER_TOKEN. */
  inFlightPerToken?: number;
  /**
   * Proxies (addresses, CIDR ranges, `loopback`, ...) whose X-Forwarded-For names the
   * client address; false (the default) takes the address of the connection.
   */
  trustProxy?: string | false;
  /**
   * The clock of the rate limits and of the connections' send timeouts and stalls, in Unix
   * milliseconds (tests); server/compose.ts gives it to the token checks too.
   */
  now?: () => number;
  /** Where requests and rate-limit refusals are counted; nothing is measured by default. */
  metrics?: Metrics;
  /** Writes the line of a request answered without error, instead of the logger. */
  requestLine?: RequestLineWriter;
}

/** Logger options with the Authorization header always removed from what is logged. */
export function redacted(options: Exclude<FastifyServerOptions['logger'], false | undefined>) {
  return {
    ...(typeof options === 'object' ? options : {}),
    redact: { paths: ['req.headers.authorization', 'headers.authorization'], remove: true },
  };
}

const isLogger = (logger: AppOptions['logger']): logger is FastifyBaseLogger =>
  typeof logger === 'object' && typeof (logger as { child?: unknown }).child === 'function';

const CLIENT_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/** Keeps a client's X-Request-Id when it is a sane token, so logs can be correlated. */
function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : randomUUID();
}

/**
 * Builds the HTTP application around the services. Does no I/O itself: the caller opens
 * the store, builds the services, listens and closes (see src/server/compose.ts and
 * src/server/serve.ts); tests use `inject` instead.
 */
export function buildApp({
  plants,
  webhooks,
  tokens,
  events,
  rateLimitCounts,
  ready,
  logger = false,
  requestTimeoutMs = REQUEST_TIMEOUT_MS,
  headersTimeoutMs = HEADERS_TIMEOUT_MS,
  keepAliveTimeoutMs = KEEP_ALIVE_TIMEOUT_MS,
  sendTimeoutMs = SEND_TIMEOUT_MS,
  maxConnections = MAX_CONNECTIONS,
  inFlightPerToken = IN_FLIGHT_PER_TOKEN,
  corsOrigins,
  trustProxy = false,
  now,
  metrics,
  requestLine,
}: AppOptions): FastifyInstance {
  const requestLog = new RequestLog(metrics, requestLine);
  const cors = corsPolicy(corsOrigins);
  const connections = new ConnectionGuard(
    {
      inFlight: IN_FLIGHT_PER_CONNECTION,
      pipelined: PIPELINED_PER_CONNECTION,
      sendTimeoutMs,
      maxConnections,
    },
    now,
    metrics,
  );
  // Requests are measured as they are logged, when Fastify reports them complete, which it
  // does only for an app with a logger: a silent one, then, if there is nothing to log to.
  const logs = logger === false && metrics !== undefined ? { level: 'silent' } : logger;
  const app = Fastify({
    ...(isLogger(logs) ? { loggerInstance: logs } : { logger: logs && redacted(logs) }),
    logController: requestLog,
    childLoggerFactory: lazyChildLogger,
    genReqId: requestId,
    trustProxy,
    exposeHeadRoutes: false,
    bodyLimit: BODY_LIMIT,
    // Our own server, so that every connection is bounded (see connections.ts). Slow
    // senders are cut off with a 408 rather than holding a connection (and shutdown).
    serverFactory: (handler) =>
      connections.createServer(handler, {
        // Node would answer a missing Host with an empty 400 of its own; we answer it.
        requireHostHeader: false,
        headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs),
        requestTimeout: requestTimeoutMs,
        keepAliveTimeout: keepAliveTimeoutMs,
        maxHeaderSize: HEADER_SECTION_LIMIT,
        // Node checks the timeouts this often (30 s by default), so they hold to about 1 s.
        connectionsCheckingInterval: 1_000,
      }),
    // Long ids must reach the validator (and get a 400), not fall out of the router as 404s.
    routerOptions: { maxParamLength: 16 * 1024 },
    clientErrorHandler,
    // While closing, the listener already refuses new connections; requests on open
    // ones are served (with Connection: close) rather than given Fastify's own 503 body.
    return503OnClosing: false,
    // Fastify answers these outside the request lifecycle (no onSend hooks, no completion
    // log), so the request id and the request's log line are added here.
    frameworkErrors: (error, request, reply) => {
      reply.raw.once('finish', () => requestLog.requestCompleted(null, request, reply));
      reply.headers(SECURITY_HEADERS).header('x-request-id', request.id);
      if (cors !== undefined) reply.headers(cors.headersFor(request.headers.origin));
      // No onSend hook ends this body with its newline: its serializer does.
      reply.serializer((body: unknown) => withFinalNewline(JSON.stringify(body)));
      // Not returned: Fastify ignores what this returns, and a reply is a thenable.
      sendError(reply, toApiError(error));
    },
  });

  connections.useLog(app.log);
  // Before Fastify waits for the requests in flight: answers their clients stopped reading
  // (event streams above all) are cut off within about a second, not at the grace's end.
  app.addHook('preClose', (done) => {
    connections.closing(SHUTDOWN_SEND_TIMEOUT_MS);
    done();
  });
  app.decorateRequest('token', null);
  app.decorateRequest('inFlight', null);
  app.decorateRequest('routeConfig', null);
  app.setValidatorCompiler(validatorCompiler);
  registerJsonParsers(app);
  endJsonBodiesWithNewline(app);
  installErrorHandling(app);

  const credentials = authenticate(
    tokens,
    rateLimits(rateLimitCounts, now),
    new TokenRequests(inFlightPerToken),
  );
  installRequestChecks(app, credentials, cors);

  plantRoutes(app, plants);
  webhookRoutes(app, webhooks);
  eventRoutes(app, events, tokens);
  systemRoutes(app, ready);
  return app;
}
