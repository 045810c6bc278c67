import { PlantstoreError } from './errors.js';
import { int64Shapes } from './int64-shapes.js';
import { parseBody } from './json.js';
import type { RetryOptions } from './types.js';

/** How a client reaches the server; every part but `baseUrl` has a default. */
export interface ClientOptions {
  /** Where the server is, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  baseUrl: string;
  /** The access token, sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Retrying for every request (each request may give its own); by default none. */
  retry?: RetryOptions;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** The fetch to use (tests, proxies); the global one by default. */
  fetch?: typeof fetch;
  /** Waits between attempts; injectable so that tests need not wait. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** The clock `Retry-After` dates are read against, in ms since the epoch. */
  now?: () => number;
}

/** One request, ready to send: everything but the attempts. */
export interface Prepared {
  method: string;
  url: URL;
  /** `"METHOD /path/{template}"`: which generated int64 shape reads the answer. */
  operation: string;
  headers: Record<string, string>;
  body?: string;
  retry?: RetryOptions;
  signal?: AbortSignal;
}

export interface RawAnswer {
  status: number;
  data: unknown;
  headers: Headers;
  url: URL;
}

const DEFAULT_MAX_DELAY_MS = 60_000;
/** Backoff base when a retryable answer does not say when (a proxy's 503, say). */
const BACKOFF_MS = 500;

const defaultSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    signal?.throwIfAborted();
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', abort, { once: true });
  });

/** An `Idempotency-Key` value: the key as a Structured Field String. */
export function idempotencyKeyField(key: string): string {
  return `"${key.replace(/[\\"]/g, '\\$&')}"`;
}

/** The URL of `template` under the base, with path parameters and query filled in. */
export function buildUrl(
  baseUrl: string,
  template: string,
  params: Record<string, unknown> = {},
  query: Record<string, unknown> = {},
): URL {
  const path = template.replace(/\{([^}]+)\}/g, (_match, name: string) => {
    const value = params[name];
    if (value === undefined || value === null) {
      throw new TypeError(`the path parameter "${name}" of ${template} is missing`);
    }
    // String(bigint) has every digit: ids in paths stay exact.
    return encodeURIComponent(String(value as string | number | bigint));
  });
  const pairs = Object.entries(query).flatMap(([name, value]) =>
    [value]
      .flat()
      .filter((item) => item !== undefined && item !== null)
      .map((item) => `${encodeURIComponent(name)}=${encodeURIComponent(String(item))}`),
  );
  const search = pairs.length > 0 ? `?${pairs.join('&')}` : '';
  return new URL(`${baseUrl.replace(/\/+$/, '')}${path}${search}`);
}

const isJson = (type: string | null) =>
  type !== null && /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(type);

async function decode(response: Response, operation: string): Promise<unknown> {
  const text = await response.text();
  if (text === '') return undefined;
  if (!isJson(response.headers.get('content-type'))) return text;
  return parseBody(text, int64Shapes[operation]?.[String(response.status)]);
}

async function errorOf(response: Response, now: number): Promise<PlantstoreError> {
  let body: unknown;
  try {
    body = parseBody(await response.text());
  } catch {
    // Not JSON: PlantstoreError says the answer had no Error body.
    body = undefined;
  }
  return new PlantstoreError(response.status, body, response.headers, now);
}

/**
 * Whether to send again after `error`, and after how many ms. `429` was refused before
 * anything happened; `409` 40903 waits for a request with the same key; a `503` on a create
 * without `Idempotency-Key` is not retried, as the first attempt may have created the plant.
 */
function retryDelay(error: PlantstoreError, prepared: Prepared, attempt: number): number | null {
  const retry = prepared.retry;
  if (retry === undefined || attempt >= retry.attempts) return null;
  const keyed = 'idempotency-key' in prepared.headers;
  const retryable =
    error.status === 429 ||
    (error.status === 503 && (prepared.method !== 'POST' || keyed)) ||
    (error.status === 409 && error.code === 40903);
  if (!retryable) return null;
  const delay =
    error.retryAfter !== undefined ? error.retryAfter * 1000 : BACKOFF_MS * 2 ** attempt;
  return delay <= (retry.maxDelayMs ?? DEFAULT_MAX_DELAY_MS) ? delay : null;
}

/** Sends a request, retrying as asked; the answer, or a PlantstoreError for an error status. */
export async function send(options: ClientOptions, prepared: Prepared): Promise<RawAnswer> {
  const fetchFn = options.fetch ?? globalThis.fetch;
  const now = options.now ?? Date.now;
  for (let attempt = 1; ; attempt++) {
    const response = await fetchFn(prepared.url, {
      method: prepared.method,
      headers: prepared.headers,
      ...(prepared.body !== undefined && { body: prepared.body }),
      ...(prepared.signal && { signal: prepared.signal }),
    });
    if (response.ok) {
      const data = await decode(response, prepared.operation);
      return { status: response.status, data, headers: response.headers, url: prepared.url };
    }
    const error = await errorOf(response, now());
    const delay = retryDelay(error, prepared, attempt);
    if (delay === null) throw error;
    await (options.sleep ?? defaultSleep)(delay, prepared.signal);
  }
}

/** The headers every request of this client sends, then the request's own. */
export function requestHeaders(
  options: ClientOptions,
  own: Record<string, string | undefined>,
): Record<string, string> {
  const all: Record<string, string | undefined> = {
    accept: 'application/json',
    ...(options.token !== undefined && { authorization: `Bearer ${options.token}` }),
    ...options.headers,
    ...own,
  };
  return Object.fromEntries(
    Object.entries(all)
      .filter((entry): entry is [string, string] => entry[1] !== undefined)
      .map(([name, value]) => [name.toLowerCase(), value]),
  );
}
