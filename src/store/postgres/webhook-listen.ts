import pg from 'pg';
import type { Log } from '../../core/log.js';
import { CONNECT_TIMEOUT_MS } from './timeouts.js';
import { WEBHOOK_CHANNEL } from './webhooks.js';

/** How long to wait before listening again after the connection was lost. */
const RECONNECT_MS = 1000;

/**
 * LISTENs on the webhook channel on a connection of its own (a pooled connection cannot
 * keep a LISTEN), so that a message written by any process on the database wakes this
 * one's dispatcher within milliseconds. Started on first use: `token` commands never
 * listen. A lost connection is opened again after a pause; until then, and for anything
 * missed meanwhile, the dispatcher's poll finds the messages, and a fresh LISTEN wakes it
 * once in case it missed some.
 */
export class WebhookNotifications {
  private client: pg.Client | undefined;
  private started = false;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly notify: () => void,
    private readonly log: Log,
  ) {}

  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    void this.listen();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch((error: unknown) => {
      this.log.warn({ err: error }, 'closing the webhook LISTEN connection failed');
    });
  }

  private async listen(): Promise<void> {
    const client = new pg.Client({ ...this.config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    this.client = client;
    client.on('notification', () => this.notify());
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, undefined));
    try {
      await client.connect();
      await client.query(`LISTEN ${WEBHOOK_CHANNEL}`);
      this.notify();
    } catch (error) {
      this.lost(client, error);
    }
  }

  private lost(client: pg.Client, error: unknown): void {
    if (this.closed || this.client !== client) return;
    this.client = undefined;
    this.log.warn(
      { err: error },
      'the webhook LISTEN connection was lost; polling until it is back',
    );
    // Ending a connection already lost fails more often than not; the loss is logged above.
    client.end().catch(() => undefined);
    this.retry = setTimeout(() => void this.listen(), RECONNECT_MS);
    this.retry.unref();
  }
}
