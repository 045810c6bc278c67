import { INT64_MAX, INT64_MIN } from '../../core/int64.js';
import type {
  DeliveryQuery,
  NewWebhookEndpoint,
  WebhookEndpoint,
  WebhookEndpointChange,
} from '../../core/webhooks/endpoint.js';
import { WebhookEndpointLimitError, type WebhookStore } from '../store.js';
import {
  ATTEMPT_COLUMNS,
  DISABLED_REASON_AFTER_UPDATE,
  type AttemptRow,
  ENDPOINT_COLUMNS,
  type EndpointRow,
  eventsToText,
  MESSAGE_COLUMNS,
  type MessageRow,
  toDeliveries,
  toEndpoint,
} from '../webhook-rows.js';
import type { Query } from './query.js';
import { RESUMED_POSITION } from '../webhook-log.js';

/** The channel every plantstore on the database LISTENs on to hear of new messages. */
export const WEBHOOK_CHANNEL = 'plantstore_webhooks';

/** PostgreSQL hands timestamptz over as a Date already. */
export const postgresTime = (value: unknown): Date => value as Date;

const endpointOf = (row: EndpointRow | undefined): WebhookEndpoint | undefined =>
  row === undefined ? undefined : toEndpoint(row, postgresTime);

/**
 * Endpoints and their deliveries on PostgreSQL; `wake` is called after a retry asked for (a
 * message for the queue), `changed` after an endpoint's create or update (it may have room
 * for messages: the fan-out looks).
 */
export function postgresWebhooks(
  query: Query,
  wake: () => void,
  changed: () => void,
): WebhookStore {
  return {
    async create({ url, events, description, secret, at }: NewWebhookEndpoint, maxEndpoints) {
      // Its position in the log: the last seq drawn (0014_webhook_log_positions.sql).
      const { rows } = await query<EndpointRow>(
        'webhooks.create',
        `INSERT INTO webhook_endpoints
           (url, events, description, created_at, updated_at, secret, log_position)
         SELECT $1, $2, $3, $4, $4, $5, coalesce(pg_sequence_last_value(
           pg_get_serial_sequence('audit_log', 'seq')::regclass), 0)
         WHERE webhook_endpoint_room($6)
         RETURNING ${ENDPOINT_COLUMNS}`,
        [
          url,
          eventsToText(events),
          description ?? null,
          at,
          secret,
          (maxEndpoints ?? INT64_MAX).toString(),
        ],
      );
      if (rows[0] === undefined) throw new WebhookEndpointLimitError(maxEndpoints!);
      changed();
      return toEndpoint(rows[0], postgresTime);
    },
    async get(id) {
      const { rows } = await query<EndpointRow>(
        'webhooks.get',
        `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1`,
        [id.toString()],
      );
      return endpointOf(rows[0]);
    },
    async list({ limit, after }) {
      const { rows } = await query<EndpointRow>(
        'webhooks.list',
        `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id > $1 ORDER BY id LIMIT $2`,
        [(after ?? INT64_MIN).toString(), limit],
      );
      return rows.map((row) => toEndpoint(row, postgresTime));
    },
    async update(id, change, at) {
      const updated = await update(query, id, change, at);
      if (updated !== undefined) changed();
      return updated;
    },
    async delete(id) {
      const { rowCount } = await query(
        'webhooks.delete',
        'DELETE FROM webhook_endpoints WHERE id = $1',
        [id.toString()],
      );
      return (rowCount ?? 0) > 0;
    },
    async rotateSecret(id, secret, at, previousUntil) {
      const { rows } = await query<EndpointRow>(
        'webhooks.rotate',
        `UPDATE webhook_endpoints SET previous_secret = secret, previous_until = $2, secret = $3,
           updated_at = $4
         WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
        [id.toString(), previousUntil, secret, at],
      );
      return endpointOf(rows[0]);
    },
    deliveries: (deliveryQuery) => deliveries(query, deliveryQuery),
    async retry(endpointId, messageId, at) {
      const { rows } = await query<{ messages: bigint }>(
        'webhooks.retry',
        `WITH outboxed AS (
           UPDATE webhook_messages SET status = 'pending', next_attempt_at = $3,
             completed_at = NULL
           WHERE id = $1 AND endpoint_id = $2 RETURNING 1),
         notified AS (
           SELECT pg_notify('${WEBHOOK_CHANNEL}', '') FROM (SELECT 1 FROM outboxed LIMIT 1) o)
         SELECT (SELECT count(*) FROM notified) AS messages`,
        [messageId.toString(), endpointId.toString(), at],
      );
      const retried = Number(rows[0]?.messages ?? 0) > 0;
      if (retried) wake();
      return retried;
    },
  };
}

async function update(
  query: Query,
  id: bigint,
  change: WebhookEndpointChange,
  at: Date,
): Promise<WebhookEndpoint | undefined> {
  const { rows } = await query<EndpointRow>(
    'webhooks.update',
    `UPDATE webhook_endpoints SET url = coalesce($2, url), events = coalesce($3, events),
       description = CASE WHEN $4::boolean THEN $5 ELSE description END,
       enabled = coalesce($6, enabled),
       disabled_reason = ${DISABLED_REASON_AFTER_UPDATE('$6::boolean')},
       failing_since = CASE WHEN $6 THEN NULL ELSE failing_since END,
       log_position = ${RESUMED_POSITION('$6::boolean', 'greatest')},
       updated_at = $7
     WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
    [
      id.toString(),
      change.url ?? null,
      change.events === undefined ? null : eventsToText(change.events),
      change.description !== undefined,
      change.description ?? null,
      change.enabled ?? null,
      at,
    ],
  );
  return endpointOf(rows[0]);
}

async function deliveries(
  query: Query,
  { endpointId, limit, after, status }: DeliveryQuery,
): Promise<ReturnType<typeof toDeliveries>> {
  const values: unknown[] = [endpointId.toString(), limit];
  const where = ['endpoint_id = $1'];
  if (after !== undefined) where.push(`id < $${values.push(after.toString())}`);
  if (status !== undefined) where.push(`status = $${values.push(status)}`);
  const messages = await query<MessageRow>(
    `webhooks.deliveries.${after !== undefined}.${status !== undefined}`,
    `SELECT ${MESSAGE_COLUMNS} FROM webhook_messages WHERE ${where.join(' AND ')}
     ORDER BY id DESC LIMIT $2`,
    values,
    // Planned with its values: a generic plan walks every endpoint's messages by id, filtering
    // this endpoint's, which for a quiet endpoint means reading all of them.
    { planEachTime: true },
  );
  const ids = messages.rows.map((row) => row.id.toString());
  const attempts = await query<AttemptRow>(
    'webhooks.attempts',
    `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE message_id = ANY($1::bigint[])
     ORDER BY id`,
    [ids],
  );
  return toDeliveries(messages.rows, attempts.rows, postgresTime);
}
