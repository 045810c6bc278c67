import { Type } from '@sinclair/typebox';
import { DELIVERY_STATUSES, WEBHOOK_EVENTS } from '../core/webhooks/events.js';
import { DISABLED_REASONS, WEBHOOK_LIMITS } from '../core/webhooks/endpoint.js';
import { Int64, Plant } from './schemas.js';

export const WebhookEventName = Type.Union(
  WEBHOOK_EVENTS.map((event) => Type.Literal(event)),
  { description: 'A kind of plant change: `plant.created`, `plant.updated` or `plant.deleted`.' },
);

const Url = Type.String({
  minLength: 1,
  maxLength: WEBHOOK_LIMITS.urlMaxLength,
  description:
    'Where messages are POSTed: an `http` or `https` URL without credentials, whose host ' +
    'resolves to public addresses only (unless the server opens networks with ' +
    '`--webhook-allow-networks`).',
});

const Events = Type.Array(WebhookEventName, {
  minItems: 1,
  maxItems: WEBHOOK_EVENTS.length,
  uniqueItems: true,
  description: 'The changes the endpoint receives messages for.',
});

const Description = Type.String({
  minLength: 1,
  maxLength: WEBHOOK_LIMITS.descriptionMaxLength,
  pattern: '^[^\\u0000]*$',
  description: `What the endpoint is for, for people: up to ${WEBHOOK_LIMITS.descriptionMaxLength} characters.`,
});

const Time = (description: string) =>
  Type.Unsafe<Date>({ type: 'string', format: 'date-time', description });

export const WebhookId = Int64({ description: 'Identifier of the webhook endpoint.' });

const endpointFields = {
  id: WebhookId,
  url: Url,
  events: Events,
  description: Type.Optional(Description),
  enabled: Type.Boolean({
    description:
      'False once disabled: by a PATCH, by a `410 Gone` answer, or after failing only ' +
      'for the time `--webhook-disable-after` gives. A disabled endpoint gets no messages.',
  }),
  disabledReason: Type.Optional(
    Type.Union(
      DISABLED_REASONS.map((reason) => Type.Literal(reason)),
      {
        description:
          'Why the endpoint is disabled, only while it is: `request` (a PATCH), `gone` (its ' +
          'receiver answered `410 Gone`) or `failing` (nothing but failures for ' +
          '`--webhook-disable-after`). Absent if an older plantstore, which kept no ' +
          'reason, disabled it.',
      },
    ),
  ),
  createdAt: Time('When the endpoint was created.'),
  updatedAt: Time('When the endpoint was last changed.'),
};

export const WebhookEndpoint = Type.Object(endpointFields, {
  additionalProperties: false,
  description: 'A webhook endpoint (subscription). Its secret is shown only when made.',
});

export const WebhookEndpointWithSecret = Type.Object(
  {
    ...endpointFields,
    secret: Type.String({
      pattern: '^whsec_[A-Za-z0-9+/]{43}=$',
      description:
        'The signing secret, `whsec_` + base64 of 32 random bytes. Shown in this answer ' +
        'only: keep it to verify `webhook-signature`.',
    }),
  },
  { additionalProperties: false, description: 'A webhook endpoint with its new signing secret.' },
);

export const WebhookEndpointList = Type.Array(WebhookEndpoint, {
  description: 'Webhook endpoints in ascending id order.',
});

export const NewWebhookEndpoint = Type.Object(
  {
    url: Url,
    events: Type.Optional(
      Type.Array(WebhookEventName, {
        minItems: 1,
        maxItems: WEBHOOK_EVENTS.length,
        uniqueItems: true,
        description:
          'The changes the endpoint receives messages for; `["plant.created"]` if absent.',
      }),
    ),
    description: Type.Optional(Description),
  },
  { additionalProperties: false },
);

export const WebhookEndpointPatch = Type.Object(
  {
    url: Type.Optional(Url),
    events: Type.Optional(Events),
    description: Type.Optional(
      Type.Unsafe<string | null>({
        ...Description,
        type: ['string', 'null'],
        description: 'New description, or null to remove it.',
      }),
    ),
    enabled: Type.Optional(
      Type.Boolean({
        description:
          'false stops sending to the endpoint: its pending messages are kept, and the ' +
          'changes made while it is disabled wait for it in the changes log. true re-enables ' +
          'it: the pending messages are sent, then the changes made meanwhile (those the log ' +
          'still keeps, --events-retention), then every new change.',
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'A JSON merge patch (RFC 7396): absent fields are left alone, null removes.',
  },
);

export const WebhookParams = Type.Object({ id: WebhookId }, { additionalProperties: false });

export const DeliveryId = Int64({ description: 'Identifier of the delivery (message).' });

export const DeliveryParams = Type.Object(
  { id: WebhookId, deliveryId: DeliveryId },
  { additionalProperties: false },
);

const limit = Type.Optional(
  Type.Integer({
    minimum: 1,
    maximum: WEBHOOK_LIMITS.listMax,
    default: WEBHOOK_LIMITS.listDefault,
    description: 'Largest number of items to return.',
  }),
);

export const WebhookListQuery = Type.Object(
  {
    limit,
    after: Type.Optional(
      Int64({ description: 'Cursor: return only endpoints whose id is greater than this.' }),
    ),
  },
  { additionalProperties: false },
);

export const DeliveryStatus = Type.Union(
  DELIVERY_STATUSES.map((status) => Type.Literal(status)),
  {
    description:
      '`pending`: to be sent (again); `delivered`: answered 2xx; `failed`: every attempt ' +
      'of the retry schedule failed.',
  },
);

export const DeliveryListQuery = Type.Object(
  {
    limit,
    after: Type.Optional(
      Int64({ description: 'Cursor: return only deliveries whose id is smaller than this.' }),
    ),
    status: Type.Optional(DeliveryStatus),
  },
  { additionalProperties: false },
);

export const DeliveryAttempt = Type.Object(
  {
    at: Time('When the attempt started.'),
    durationMs: Type.Integer({ minimum: 0, description: 'How long it took, in milliseconds.' }),
    httpStatus: Type.Union([Type.Integer(), Type.Null()], {
      description: "The receiver's status; null when there was no answer.",
    }),
    error: Type.Union([Type.String(), Type.Null()], {
      description:
        'Why the attempt failed without an answer (refused, timed out, an address not ' +
        'allowed) or what was wrong with the answer (a redirect); null otherwise.',
    }),
    responseExcerpt: Type.String({ description: "The first 1 KiB of the receiver's answer." }),
  },
  { additionalProperties: false },
);

export const Delivery = Type.Object(
  {
    id: DeliveryId,
    webhookId: Type.String({
      description: 'The `webhook-id` header of the message, the same on every attempt.',
    }),
    eventType: WebhookEventName,
    payload: Plant,
    status: DeliveryStatus,
    createdAt: Time('When the change that caused the message was committed.'),
    nextAttemptAt: Type.Optional(
      Time(
        'When the next attempt is due; only while pending. While the endpoint is disabled, ' +
          'none is made, however due: the message waits for the endpoint to be enabled again.',
      ),
    ),
    attempts: Type.Array(DeliveryAttempt, { description: 'Every attempt, oldest first.' }),
  },
  { additionalProperties: false, description: 'One message to one endpoint, and its attempts.' },
);

export const DeliveryList = Type.Array(Delivery, { description: 'Deliveries, newest first.' });

/** Schemas published under components/schemas, by name. */
export const webhookComponents = {
  WebhookEndpoint,
  WebhookEndpointWithSecret,
  NewWebhookEndpoint,
  WebhookEndpointPatch,
  Delivery,
  DeliveryAttempt,
};
