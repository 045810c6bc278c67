import type Database from 'better-sqlite3';
import type {
  DeliveryQuery,
  NewWebhookEndpoint,
  WebhookEndpoint,
  WebhookEndpointChange,
  WebhookEndpointQuery,
} from '../../core/webhooks/endpoint.js';
import { INT64_MIN } from '../../core/int64.js';
import { WebhookEndpointLimitError, type WebhookStore } from '../store.js';
import {
  ATTEMPT_COLUMNS,
  DISABLED_REASON_AFTER_UPDATE,
  type AttemptRow,
  ENDPOINT_COLUMNS,
  type EndpointRow,
  epochMillis,
  eventsToText,
  MESSAGE_COLUMNS,
  type MessageRow,
  toDeliveries,
  toEndpoint,
} from '../webhook-rows.js';
import type { GroupCommit } from './group-commit.js';
import { RESUMED_POSITION } from '../webhook-log.js';
import { batchedWrites, guard } from './query.js';

/** SQLite keeps times as Unix milliseconds (read as bigint with safe integers). */
export const sqliteTime = epochMillis;

function prepare(db: Database.Database) {
  const deliveryPage = (where: string) =>
    db.prepare(
      `SELECT ${MESSAGE_COLUMNS} FROM webhook_messages
       WHERE endpoint_id = @endpointId ${where} ORDER BY id DESC LIMIT @limit`,
    );
  return {
    count: db.prepare('SELECT count(*) FROM webhook_endpoints').pluck(),
    insert: db.prepare(
      `INSERT INTO webhook_endpoints
         (url, events, description, created_at, updated_at, secret, log_position)
       VALUES (?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) FROM audit_log))
       RETURNING ${ENDPOINT_COLUMNS}`,
    ),
    getOne: db.prepare(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?`),
    page: db.prepare(
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id > ? ORDER BY id LIMIT ?`,
    ),
    update: db.prepare(
      `UPDATE webhook_endpoints SET url = coalesce(@url, url),
         events = coalesce(@events, events),
         description = CASE WHEN @setDescription THEN @description ELSE description END,
         enabled = coalesce(@enabled, enabled),
         disabled_reason = ${DISABLED_REASON_AFTER_UPDATE('@enabled')},
         failing_since = CASE WHEN @enabled = 1 THEN NULL ELSE failing_since END,
         log_position = ${RESUMED_POSITION('@enabled', 'max')},
         updated_at = @at
       WHERE id = @id RETURNING ${ENDPOINT_COLUMNS}`,
    ),
    removeAttempts: db.prepare(
      `DELETE FROM webhook_attempts
       WHERE message_id IN (SELECT id FROM webhook_messages WHERE endpoint_id = ?)`,
    ),
    removeMessages: db.prepare('DELETE FROM webhook_messages WHERE endpoint_id = ?'),
    remove: db.prepare('DELETE FROM webhook_endpoints WHERE id = ?'),
    rotate: db.prepare(
      `UPDATE webhook_endpoints SET previous_secret = secret, previous_until = ?, secret = ?,
         updated_at = ?
       WHERE id = ? RETURNING ${ENDPOINT_COLUMNS}`,
    ),
    deliveries: {
      all: deliveryPage(''),
      after: deliveryPage('AND id < @after'),
      status: deliveryPage('AND status = @status'),
      statusAfter: deliveryPage('AND status = @status AND id < @after'),
    },
    attemptsOf: db.prepare(
      `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts
       WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY id`,
    ),
    retry: db.prepare(
      `UPDATE webhook_messages SET status = 'pending', next_attempt_at = ?, completed_at = NULL
       WHERE id = ? AND endpoint_id = ?`,
    ),
  };
}

/**
 * Endpoints and their deliveries on SQLite; `wake` is called after a retry asked for (a
 * message for the queue), `changed` after an endpoint's create or update (it may have room
 * for messages: the fan-out looks).
 */
export function sqliteWebhooks(
  db: Database.Database,
  batches: GroupCommit,
  wake: () => void,
  changed: () => void,
): WebhookStore {
  const write = batchedWrites(batches);
  const s = prepare(db);
  const endpoint = (row: unknown): WebhookEndpoint | undefined =>
    row === undefined ? undefined : toEndpoint(row as EndpointRow, sqliteTime);
  return {
    // Counted in the write's transaction: SQLite runs one at a time, across processes too.
    create: async ({ url, events, description, secret, at }: NewWebhookEndpoint, maxEndpoints) => {
      const created = await write(() => {
        if (maxEndpoints !== undefined && Number(s.count.get()) >= maxEndpoints) {
          throw new WebhookEndpointLimitError(maxEndpoints);
        }
        const ms = at.getTime();
        const row = s.insert.get(url, eventsToText(events), description ?? null, ms, ms, secret);
        return toEndpoint(row as EndpointRow, sqliteTime);
      });
      changed();
      return created;
    },
    get: async (id) => endpoint(guard(() => s.getOne.get(id))),
    list: async ({ limit, after }: WebhookEndpointQuery) =>
      (guard(() => s.page.all(after ?? INT64_MIN, limit)) as EndpointRow[]).map((row) =>
        toEndpoint(row, sqliteTime),
      ),
    async update(id, change: WebhookEndpointChange, at) {
      const updated = await write(() => endpoint(s.update.get(updateValues(id, change, at))));
      if (updated !== undefined) changed();
      return updated;
    },
    delete: (id) =>
      write(() => {
        s.removeAttempts.run(id);
        s.removeMessages.run(id);
        return s.remove.run(id).changes > 0;
      }),
    rotateSecret: (id, secret, at, previousUntil) =>
      write(() => endpoint(s.rotate.get(previousUntil.getTime(), secret, at.getTime(), id))),
    deliveries: async (query: DeliveryQuery) =>
      guard(() => {
        const messages = deliveryPage(s, query);
        const ids = JSON.stringify(messages.map((m) => m.id.toString()));
        const attempts = s.attemptsOf.all(ids) as AttemptRow[];
        return toDeliveries(messages, attempts, sqliteTime);
      }),
    async retry(endpointId, messageId, at) {
      const retried = await write(
        () => s.retry.run(at.getTime(), messageId, endpointId).changes > 0,
      );
      if (retried) wake();
      return retried;
    },
  };
}

function updateValues(id: bigint, change: WebhookEndpointChange, at: Date) {
  return {
    id,
    url: change.url ?? null,
    events: change.events === undefined ? null : eventsToText(change.events),
    setDescription: change.description === undefined ? 0 : 1,
    description: change.description ?? null,
    enabled: change.enabled === undefined ? null : change.enabled ? 1 : 0,
    at: at.getTime(),
  };
}

type Statements = ReturnType<typeof prepare>;

function deliveryPage(s: Statements, { endpointId, limit, after, status }: DeliveryQuery) {
  const statement =
    status === undefined
      ? after === undefined
        ? s.deliveries.all
        : s.deliveries.after
      : after === undefined
        ? s.deliveries.status
        : s.deliveries.statusAfter;
  return statement.all({ endpointId, limit, after, status }) as MessageRow[];
}
