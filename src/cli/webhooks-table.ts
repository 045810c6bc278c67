// What the `plantstore webhooks` commands show: endpoints and their deliveries as a table for
// people and as JSON Lines for scripts, and the signing secret, which only create and
// rotate-secret have to show.
import type { components } from '@plantstore/client';
import { stringifyBody } from '@plantstore/client';
import { UsageError } from './options.js';
import { forTerminal } from './terminal-text.js';

export type Endpoint = components['schemas']['WebhookEndpoint'];
export type EndpointWithSecret = components['schemas']['WebhookEndpointWithSecret'];
export type Delivery = components['schemas']['Delivery'];
export type EventType = Endpoint['events'][number];
export type DeliveryStatus = Delivery['status'];

export const EVENT_TYPES: readonly EventType[] = [
  'plant.created',
  'plant.updated',
  'plant.deleted',
];
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['pending', 'delivered', 'failed'];

/**
 * `--events plant.created,plant.deleted` as the list of event types, each checked, none
 * twice; one line and exit code 2 otherwise.
 */
export function eventsArgument(text: string): EventType[] {
  const events = text
    .split(',')
    .map((event) => event.trim())
    .filter((event) => event !== '');
  const unknown = events.filter((event) => !(EVENT_TYPES as readonly string[]).includes(event));
  if (events.length === 0 || unknown.length > 0) {
    const what = events.length === 0 ? 'no event' : `"${forTerminal(unknown[0]!)}" is no event`;
    throw new UsageError(`--events: ${what}: give ${EVENT_TYPES.join(', ')}, comma-separated`);
  }
  return [...new Set(events)] as EventType[];
}

/** Rows as a table: a header, columns two spaces apart, cells made safe for a terminal. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const safe = rows.map((row) => row.map((cell) => forTerminal(cell)));
  const widths = header.map((title, i) =>
    Math.max(title.length, ...safe.map((row) => row[i]!.length)),
  );
  return [header, ...safe]
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
    .concat('\n');
}

/** An endpoint without its secret: only create and rotate-secret may show that. */
export function withoutSecret(endpoint: Endpoint | EndpointWithSecret): Endpoint {
  const shown: Partial<EndpointWithSecret> = { ...endpoint };
  delete shown.secret;
  return shown as Endpoint;
}

/** One endpoint as a JSON line, its id exact; never its secret. */
export const endpointJson = (endpoint: Endpoint) => `${stringifyBody(withoutSecret(endpoint))}\n`;

/** Why it is disabled, in a few words a person reads without the docs. */
const DISABLED_BECAUSE = {
  request: 'no (by request)',
  gone: 'no (410 Gone)',
  failing: 'no (failing)',
} as const;

const enabledText = (endpoint: Endpoint) =>
  endpoint.enabled
    ? 'yes'
    : endpoint.disabledReason === undefined
      ? 'no'
      : DISABLED_BECAUSE[endpoint.disabledReason];

export function endpointTable(endpoints: readonly Endpoint[]): string {
  return table(
    ['ID', 'URL', 'EVENTS', 'ENABLED', 'DESCRIPTION'],
    endpoints.map((endpoint) => [
      String(endpoint.id),
      endpoint.url,
      endpoint.events.join(','),
      enabledText(endpoint),
      endpoint.description ?? '-',
    ]),
  );
}

/** The outcome of a delivery's last attempt: the receiver's status, or why there was none. */
function lastResult(delivery: Delivery): string {
  const last = delivery.attempts.at(-1);
  if (last === undefined) return '-';
  return last.httpStatus === null ? (last.error ?? '-') : String(last.httpStatus);
}

/** One delivery as a JSON line, ids exact (the delivery's and the plant's). */
export const deliveryJson = (delivery: Delivery) => `${stringifyBody(delivery)}\n`;

/**
 * The deliveries of one endpoint as a table. Of a disabled endpoint, a pending message's next
 * attempt is not made when its time comes (a time already past, often), but once the
 * endpoint is enabled again: the column says so.
 */
export function deliveryTable(deliveries: readonly Delivery[], enabled = true): string {
  const next = (delivery: Delivery) =>
    delivery.nextAttemptAt === undefined ? '-' : enabled ? delivery.nextAttemptAt : 'when enabled';
  return table(
    ['ID', 'STATUS', 'EVENT', 'PLANT', 'CREATED', 'ATTEMPTS', 'LAST RESULT', 'NEXT ATTEMPT'],
    deliveries.map((delivery) => [
      String(delivery.id),
      delivery.status,
      delivery.eventType,
      String(delivery.payload.id),
      delivery.createdAt,
      String(delivery.attempts.length),
      lastResult(delivery),
      next(delivery),
    ]),
  );
}

/**
 * An endpoint with its new secret, for people: the endpoint's table, then the secret on a
 * line of its own, so that it can be copied.
 */
export const secretTable = (endpoint: EndpointWithSecret) =>
  `${endpointTable([withoutSecret(endpoint)])}\nsecret: ${forTerminal(endpoint.secret)}\n`;

/** An endpoint with its new secret as one JSON line: the only JSON that holds a secret. */
export const secretJson = (endpoint: EndpointWithSecret) => `${stringifyBody(endpoint)}\n`;
