import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

/**
 * One log line per request, written when the answer is complete: method, route
 * template, status, duration and (from the child logger) the request id. Headers are
 * never logged, so neither is the Authorization header.
 */
export class RequestLog extends LogController {
  constructor() {
    super({ requestIdLogLabel: 'reqId' });
  }

  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    const entry = {
      method: request.method,
      route: request.routeOptions.url ?? null,
      url: request.url,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100,
    };
    if (error) request.log.error({ ...entry, err: error }, 'request');
    else request.log.info(entry, 'request');
  }
}
