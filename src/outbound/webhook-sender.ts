import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import type { AddressPolicy } from '../core/webhooks/address-policy.js';
import {
  type OutboundMessage,
  RETRY_AFTER_STATUSES,
  type SendOutcome,
  type WebhookSender,
} from '../core/webhooks/delivery.js';
import {
  describe,
  guardedLookup,
  literalRefusal,
  type Resolve,
  systemResolve,
  UnsafeDestinationError,
} from './destination.js';
import { parseRetryAfter } from './retry-after.js';

/** The part of an answer kept in the attempt log. */
export const EXCERPT_BYTES = 1024;
/** Idle connections kept open per destination host, for the next attempts there. */
export const IDLE_SOCKETS_PER_HOST = 256;
/** How long a connection is kept open unused. */
export const IDLE_SOCKET_MS = 4000;
/** More of an answer than this is not read: the connection is closed instead. */
const DRAIN_BYTES = 64 * 1024;

export interface SenderOptions {
  policy: AddressPolicy;
  /** The whole attempt, connection to answer, must end within this. */
  timeoutMs: number;
  /** `plantstore/<version>`. */
  userAgent: string;
  resolve?: Resolve;
  /** For tests: how "now" is measured, for durations. */
  clock?: () => number;
  /** For tests: IDLE_SOCKET_MS. */
  idleMs?: number;
}

/**
 * Sends webhook messages over node:http and node:https with keep-alive connections.
 * Every connection goes through the address policy at connect time (see guardedLookup);
 * redirects are answers like any other, never followed.
 */
export class HttpWebhookSender implements WebhookSender {
  private readonly options: Required<SenderOptions>;
  private readonly agents: { http: http.Agent; https: https.Agent };

  constructor(options: SenderOptions) {
    this.options = {
      resolve: systemResolve,
      clock: () => performance.now(),
      idleMs: IDLE_SOCKET_MS,
      ...options,
    };
    const lookup = guardedLookup(options.policy, this.options.resolve);
    // No cap on connections per host: endpoints often share one (a relay, a tenant's paths),
    // and a request waiting in the agent's queue behind another endpoint's hung attempts
    // would wait out their timeouts. The dispatcher already bounds what is in flight, per
    // endpoint (its window, at most 16) and per process (core/webhooks/fair-share.ts). The
    // connections a burst opened are kept for the next, up to 256 per host (Node's default),
    // each closed after IDLE_SOCKET_MS unused (the agent's `timeout` closes a free socket;
    // on one in use it only emits an event no one listens to: the attempt has its own
    // timer). Keeping 16, 1,000 endpoints at one host opened a connection for three
    // deliveries in four, a fifth of the server's CPU a delivery (bench/HISTORY.md).
    const agent = {
      keepAlive: true,
      maxFreeSockets: IDLE_SOCKETS_PER_HOST,
      timeout: this.options.idleMs,
      lookup,
    };
    this.agents = { http: new http.Agent(agent), https: new https.Agent(agent) };
  }

  async send(message: OutboundMessage, signal?: AbortSignal): Promise<SendOutcome> {
    const started = this.options.clock();
    const elapsed = () => Math.round(this.options.clock() - started);
    const url = new URL(message.url);
    // A literal address is connected to without a lookup, so it is checked here.
    const refused = literalRefusal(url.hostname, this.options.policy);
    if (refused !== undefined) return failure(`unsafe destination: ${refused}`, elapsed());
    return await this.post(url, message, signal).then(
      (answer) => ({ ...answer, durationMs: elapsed() }),
      (error: unknown) => ({
        ...failure(
          error instanceof UnsafeDestinationError
            ? `unsafe destination: ${error.message}`
            : describe(error),
          elapsed(),
        ),
        ...(signal?.aborted === true && { abandoned: true }),
      }),
    );
  }

  /** Stops keeping connections open. */
  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  private post(
    url: URL,
    message: OutboundMessage,
    signal: AbortSignal | undefined,
  ): Promise<Omit<SendOutcome, 'durationMs'>> {
    const secure = url.protocol === 'https:';
    return new Promise((resolve, reject) => {
      const request = (secure ? https : http).request(url, {
        method: 'POST',
        agent: secure ? this.agents.https : this.agents.http,
        headers: this.headers(message),
        ...(signal !== undefined && { signal }),
      });
      const timer = setTimeout(() => {
        request.destroy(new Error(`timed out after ${this.options.timeoutMs} ms`));
      }, this.options.timeoutMs);
      const done = () => clearTimeout(timer);
      let answered = false;
      request.on('error', (error) => {
        done();
        // Once there is an answer, its reading decides (see readAnswer).
        if (!answered) reject(error);
      });
      request.on('response', (response) => {
        answered = true;
        readAnswer(response, request).then(
          (answer) => {
            done();
            resolve(answer);
          },
          (error: unknown) => {
            done();
            reject(error instanceof Error ? error : new Error(String(error)));
          },
        );
      });
      request.end(message.body);
    });
  }

  private headers(message: OutboundMessage): Record<string, string> {
    return {
      'content-type': 'application/json',
      'user-agent': this.options.userAgent,
      'webhook-id': message.messageId,
      'webhook-timestamp': String(message.timestamp),
      'webhook-signature': message.signature,
      'webhook-event-type': message.eventType,
    };
  }
}

function failure(error: string, durationMs: number): SendOutcome {
  return { status: null, error, durationMs, excerpt: '', retryAfterMs: null };
}

/**
 * The status and the first 1 KiB of an answer. The rest is read and dropped so that the
 * connection can be used again, up to a bound; a longer or endless answer has its
 * connection closed. An attempt that times out while its body is arriving still has its
 * status: the receiver did answer.
 */
function readAnswer(
  response: IncomingMessage,
  request: http.ClientRequest,
): Promise<Omit<SendOutcome, 'durationMs'>> {
  const status = response.statusCode ?? null;
  const chunks: Buffer[] = [];
  let size = 0;
  return new Promise((resolve) => {
    const finish = () => {
      const excerpt = Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8');
      const retryAfterMs =
        status !== null && RETRY_AFTER_STATUSES.has(status)
          ? parseRetryAfter(response.headers['retry-after'], Date.now())
          : null;
      resolve({ status, error: answerProblem(status, response), excerpt, retryAfterMs });
    };
    response.on('data', (chunk: Buffer) => {
      if (size < EXCERPT_BYTES) chunks.push(chunk);
      size += chunk.length;
      if (size > DRAIN_BYTES) {
        request.destroy();
        finish();
      }
    });
    response.on('end', finish);
    // A timeout or a cut while the body arrives: the status is what counts.
    response.on('error', finish);
    response.on('close', finish);
  });
}

function answerProblem(status: number | null, response: IncomingMessage): string | null {
  if (status !== null && status >= 300 && status < 400) {
    const to = response.headers.location;
    return to === undefined ? 'redirect not followed' : `redirect to ${to} not followed`;
  }
  return null;
}
