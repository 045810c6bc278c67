import type { WebhookEvent } from '../core/webhooks/events.js';

// The `webhooks` section of the document: the messages the server sends, as OpenAPI 3.1
// describes requests it makes rather than receives. `plant.created` keeps the sample's
// `/plant/webhook` key, so a client generated from the sample finds it where it was; its
// summary names the event, which /docs shows beside the key, for a reader searching for it.

type Json = Record<string, unknown>;

const header = (name: string, description: string, schema: Json = { type: 'string' }) => ({
  name,
  in: 'header',
  required: true,
  description,
  schema,
});

/** The Standard Webhooks headers every message carries. */
const HEADERS = [
  header(
    'webhook-id',
    'Unique per message (`msg_` + 32 hex digits, the first 12 the Unix milliseconds of the ' +
      'change, so ids sort by time), the same on every attempt: deduplicate on it.',
  ),
  header(
    'webhook-timestamp',
    'Unix seconds of this attempt. Reject messages whose timestamp is far from your clock ' +
      '(Standard Webhooks suggests 5 minutes) to stop replays.',
    { type: 'string', pattern: '^[0-9]+$' },
  ),
  header(
    'webhook-signature',
    '`v1,` + base64 of HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`, keyed ' +
      'with the base64-decoded bytes after `whsec_` of the secret. During the 24 hours after ' +
      'a rotation, two space-separated signatures: one by the new secret, one by the old.',
  ),
  header(
    'webhook-event-type',
    'The kind of change: `plant.created`, `plant.updated` or `plant.deleted`.',
  ),
  header('user-agent', '`plantstore/<version>`.'),
];

const MESSAGES: { key: string; event: WebhookEvent; summary: string; description: string }[] = [
  {
    key: '/plant/webhook',
    event: 'plant.created',
    summary: 'plant.created: information about a new plant added to the store',
    description: 'The new plant, as created.',
  },
  {
    key: 'plant.updated',
    event: 'plant.updated',
    summary: 'A plant was changed',
    description: 'The plant as updated.',
  },
  {
    key: 'plant.deleted',
    event: 'plant.deleted',
    summary: 'A plant was deleted',
    description: 'The plant as it was before it was deleted.',
  },
];

const OUTCOMES =
  'Any `2xx` answer acknowledges the message. `410 Gone` disables the endpoint. Anything ' +
  'else (another status, a redirect, which is never followed, no answer within the timeout) ' +
  'is a failed attempt, tried again per the retry schedule; a `Retry-After` on `429` or ' +
  '`503` lengthens the wait.';

/** The `webhooks` object of the OpenAPI document. */
export function webhookMessages(): Json {
  return Object.fromEntries(
    MESSAGES.map(({ key, event, summary, description }) => [
      key,
      {
        post: {
          operationId: `${event.replace('.', '-')}-message`,
          summary,
          description:
            `Sent to every enabled endpoint subscribed to \`${event}\`, for each change ` +
            `committed after it subscribed. The body is ${description.toLowerCase()} ` +
            `exactly: no envelope, \`tag\` absent when none, \`id\` an exact JSON integer ` +
            `at any int64 value (parse it without losing digits above 2^53). ${OUTCOMES}`,
          tags: ['webhooks'],
          security: [],
          parameters: HEADERS,
          requestBody: {
            required: true,
            description,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Plant' } } },
          },
          responses: {
            200: {
              description:
                'Return a 200 status to indicate that the data was received successfully ' +
                '(any 2xx does).',
            },
            410: { description: 'The endpoint is gone: it is disabled, and nothing more is sent.' },
          },
        },
      },
    ]),
  );
}
