import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { cli, type Server, sleep, startServer } from './server-process.js';

// Real plantstore processes with webhooks, on a database of the backend loop (backends.ts):
// a token with the webhook scopes, and the few API calls the webhook suites make.

export const ALLOW_LOOPBACK = ['--webhook-allow-networks', '127.0.0.0/8,::1/128'];

export interface Api {
  server: Server;
  token: string;
  call(method: string, path: string, body?: string): Promise<{ status: number; text: string }>;
  /** Subscribes `url`; answers the endpoint's id (as text, exact) and secret. */
  subscribe(url: string, events?: string[]): Promise<{ id: string; secret: string }>;
  /** The deliveries of an endpoint, as the API's JSON text. */
  deliveries(endpoint: string): Promise<string>;
}

/** A token with every scope on `db`. */
export async function webhookToken(db: string[]): Promise<string> {
  const scopes = 'plants:read,plants:write,webhooks:read,webhooks:write';
  const { stdout } = await cli(['token', 'create', ...db, '--scopes', scopes, '--name', 'hooks']);
  return stdout.trim();
}

export async function serveWithWebhooks(
  t: TestContext,
  db: string[],
  args: string[],
  token: string,
  extraPids: number[] = [],
): Promise<Api> {
  const server = await startServer(t, [...db, '--log-level', 'info', ...args], extraPids);
  const call: Api['call'] = async (method, path, body) => {
    const response = await fetch(server.url + path, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body }),
    });
    return { status: response.status, text: await response.text() };
  };
  return {
    server,
    token,
    call,
    async subscribe(url, events = ['plant.created', 'plant.updated', 'plant.deleted']) {
      const { status, text } = await call('POST', '/webhooks', JSON.stringify({ url, events }));
      assert.equal(status, 201, text);
      const id = /"id":(\d+)/.exec(text)![1]!;
      const secret = /"secret":"(whsec_[^"]+)"/.exec(text)![1]!;
      return { id, secret };
    },
    async deliveries(endpoint) {
      const { status, text } = await call('GET', `/webhooks/${endpoint}/deliveries`);
      assert.equal(status, 200, text);
      return text;
    },
  };
}

/**
 * Resolves with `check()`'s value once it is not undefined, asking again every 25 ms: for
 * state that no event tells of (an attempt recorded in the database after its answer).
 */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  what: string,
  ms = 20_000,
): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) assert.fail(`${what} did not happen within ${ms} ms`);
    await sleep(25);
  }
}

/** The statuses of an endpoint's deliveries, newest first. */
export function statuses(deliveriesJson: string): string[] {
  return [...deliveriesJson.matchAll(/"status":"(pending|delivered|failed)"/g)].map((m) => m[1]!);
}
