import type { Bindings, ChildLoggerOptions } from 'fastify/types/logger.js';
import {
  type FastifyBaseLogger,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import { type Metrics, noMetrics } from '../../core/metrics.js';
import { routeConfigOf } from '../routes/route.js';

const REQUEST_ID_LABEL = 'reqId';

/** The fields of a request's line, besides those every line has (level, time, msg...). */
export interface RequestLogEntry {
  reqId: string;
  method: string;
  /** The route's template (`/plants/:id`); null when no route matched. */
  route: string | null;
  url: string;
  status: number;
  durationMs: number;
  client: string;
  tokenId: number | null;
}

/**
 * Writes the line of a request answered without error, as the app's logger would at level
 * info (`request` its message), only faster; given by whoever made the logger (see
 * src/server/request-line.ts). Without one, the line goes through the logger.
 */
export type RequestLineWriter = (entry: RequestLogEntry) => void;

/**
 * One log line per request, written when the answer is complete: method, route
 * template, status, duration, the request id, and who sent it: the client address as the
 * rate limits see it and the id of the token (never the token). Headers are never logged,
 * so neither is the Authorization header.
 */
export class RequestLog extends LogController {
  constructor(
    private readonly metrics: Metrics = noMetrics,
    private readonly writeLine?: RequestLineWriter,
  ) {
    super({ requestIdLogLabel: REQUEST_ID_LABEL });
  }

  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    // Through the root logger with the id in the line: building a child logger for
    // every request only to write this one line costs more than the line.
    const log = request.server.log;
    const route = routeConfigOf(request).url ?? null;
    this.measure(route, request, reply);
    const entry: RequestLogEntry = {
      [REQUEST_ID_LABEL]: request.id,
      method: request.method,
      route,
      url: request.url,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100,
      // X-Forwarded-For's address behind a trusted proxy, else the connection's.
      client: request.ip,
      tokenId: request.token?.id ?? null,
    };
    if (error) log.error({ ...entry, err: error }, 'request');
    else if (this.writeLine !== undefined) this.writeLine(entry);
    else log.info(entry, 'request');
  }

  private measure(route: string | null, request: FastifyRequest, reply: FastifyReply): void {
    const status = reply.statusCode;
    // Paths that match no route are one label, not one per path a scanner tries.
    this.metrics.request(route ?? 'unmatched', request.method, status, reply.elapsedTime / 1000);
    if (status !== 429) return;
    // The limit that refused is the one its RateLimit-Policy field names; the only 429
    // without one is the token's requests in flight (42903), checked before its rate limit.
    const policy = /^"([^"]*)"/.exec(String(reply.getHeader('ratelimit-policy') ?? ''));
    this.metrics.rateLimited(policy === null ? 'in-flight' : policy[1]!);
  }
}

type LogMethod = (...args: unknown[]) => void;

/**
 * `request.log` for Fastify's childLoggerFactory: the child logger (with the request id)
 * is only made when something logs through it, which on the hot path nothing does.
 */
class LazyChildLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly own: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.own, this.options));
  }

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real().level = level;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real().child(bindings, options);
  }

  // The rest of pino's logger surface, for code that reaches past Fastify's minimum.
  isLevelEnabled(level: string): boolean {
    const parent = this.parent as { isLevelEnabled?: (level: string) => boolean };
    return parent.isLevelEnabled?.(level) ?? true;
  }

  bindings(): Bindings {
    const parent = this.parent as { bindings?: () => Bindings };
    return { ...parent.bindings?.(), ...this.own };
  }

  flush(callback?: (error?: Error) => void): void {
    const parent = this.parent as { flush?: (callback?: (error?: Error) => void) => void };
    if (parent.flush) parent.flush(callback);
    else callback?.();
  }

  fatal(...args: unknown[]): void {
    (this.real().fatal as LogMethod)(...args);
  }
  error(...args: unknown[]): void {
    (this.real().error as LogMethod)(...args);
  }
  warn(...args: unknown[]): void {
    (this.real().warn as LogMethod)(...args);
  }
  info(...args: unknown[]): void {
    (this.real().info as LogMethod)(...args);
  }
  debug(...args: unknown[]): void {
    (this.real().debug as LogMethod)(...args);
  }
  trace(...args: unknown[]): void {
    (this.real().trace as LogMethod)(...args);
  }
  silent(): void {}
}

export function lazyChildLogger(
  parent: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new LazyChildLogger(parent, bindings, options) as unknown as FastifyBaseLogger;
}
