import pg from 'pg';
import type { Log } from '../../core/log.js';
import { CONNECT_TIMEOUT_MS } from './timeouts.js';
import { WEBHOOK_CHANNEL } from './webhooks.js';

/** How long to wait before listening again after the connection was lost. */
const RECONNECT_MS = 1000;

/**
 * LISTENs on the webhook channel (and the changes feed's, when given) on a connection of its
 * own (a pooled connection cannot keep a LISTEN), so that a message written by any process on
 * the database wakes this one's dispatcher within milliseconds, and events numbered by any
 * process wake this one's streams. Started on first use: `token` commands never listen. A
 * lost connection is opened again after a pause; until then, and for anything missed
 * meanwhile, the dispatcher's and the feed's polls find what was written, and a fresh LISTEN
 * wakes each channel's listener once in case it missed some.
 */
export class WebhookNotifications {
  private client: pg.Client | undefined;
  private started = false;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly notify: (channel: string) => void,
    private readonly log: Log,
    private readonly channels: readonly string[] = [WEBHOOK_CHANNEL],
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
    client.on('notification', (message) => this.notify(message.channel));
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, undefined));
    try {
      await client.connect();
      for (const channel of this.channels) await client.query(`LISTEN ${channel}`);
      for (const channel of this.channels) this.notify(channel);
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
