import type { OperationSpec } from './operation.js';
import { NoQuery } from './schemas.js';
import {
  DeliveryList,
  DeliveryListQuery,
  DeliveryParams,
  NewWebhookEndpoint,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointPatch,
  WebhookEndpointWithSecret,
  WebhookListQuery,
  WebhookParams,
} from './webhook-schemas.js';

const JSON_TYPES = ['application/json'];

export const createWebhook = {
  operationId: 'createWebhook',
  method: 'POST',
  path: '/webhooks',
  summary: 'Subscribe an endpoint to plant changes',
  description:
    'Creates a webhook endpoint: from now on, every plant change of the events named is ' +
    'POSTed to the URL, signed per Standard Webhooks (see the `webhooks` section). The ' +
    'answer carries the signing secret, shown this once. A URL whose host resolves to a ' +
    'non-public address is refused (`400`), and so is every connection to one later. A ' +
    'store has at most 100 endpoints unless its server is started with another limit ' +
    '(`--webhook-max-endpoints`); past it, `409`.',
  tag: 'webhooks',
  scope: 'webhooks:write',
  query: NoQuery,
  body: { schema: NewWebhookEndpoint, mediaTypes: JSON_TYPES },
  responses: {
    201: {
      description: 'The endpoint was created; keep its secret.',
      schema: WebhookEndpointWithSecret,
      headers: ['Location'],
    },
  },
  errors: ['webhookUrlRefused', 'webhookLimitReached'],
} satisfies OperationSpec<undefined, typeof NoQuery, typeof NewWebhookEndpoint>;

export const listWebhooks = {
  operationId: 'listWebhooks',
  method: 'GET',
  path: '/webhooks',
  summary: 'List webhook endpoints',
  description:
    'Endpoints in ascending id order, one page at a time; the `Link` header carries the ' +
    'next page while there is one.',
  tag: 'webhooks',
  scope: 'webhooks:read',
  query: WebhookListQuery,
  responses: {
    200: { description: 'A page of endpoints.', schema: WebhookEndpointList, headers: ['Link'] },
  },
  errors: [],
} satisfies OperationSpec<undefined, typeof WebhookListQuery, undefined>;

export const getWebhook = {
  operationId: 'getWebhook',
  method: 'GET',
  path: '/webhooks/{id}',
  summary: 'Read a webhook endpoint',
  description: 'The endpoint with this id (never its secret).',
  tag: 'webhooks',
  scope: 'webhooks:read',
  params: WebhookParams,
  query: NoQuery,
  responses: { 200: { description: 'The endpoint.', schema: WebhookEndpoint } },
  errors: ['malformedWebhookId', 'webhookNotFound'],
} satisfies OperationSpec<typeof WebhookParams, typeof NoQuery, undefined>;

export const updateWebhook = {
  operationId: 'updateWebhook',
  method: 'PATCH',
  path: '/webhooks/{id}',
  summary: 'Update a webhook endpoint',
  description:
    'Applies a JSON merge patch (RFC 7396) to `url`, `events`, `description` and `enabled`. ' +
    '`"enabled": true` re-enables an endpoint that was disabled (by a PATCH, a `410 Gone` ' +
    'or failing for too long): the messages it had pending are then sent, and every change ' +
    'from then on. Changes made while it was disabled were not queued for it: re-enabling ' +
    'does not send them. A new URL is checked as at creation.',
  tag: 'webhooks',
  scope: 'webhooks:write',
  params: WebhookParams,
  query: NoQuery,
  body: {
    schema: WebhookEndpointPatch,
    mediaTypes: ['application/merge-patch+json', 'application/json'],
  },
  responses: { 200: { description: 'The endpoint as updated.', schema: WebhookEndpoint } },
  errors: ['malformedWebhookId', 'webhookNotFound', 'webhookUrlRefused'],
} satisfies OperationSpec<typeof WebhookParams, typeof NoQuery, typeof WebhookEndpointPatch>;

export const deleteWebhook = {
  operationId: 'deleteWebhook',
  method: 'DELETE',
  path: '/webhooks/{id}',
  summary: 'Delete a webhook endpoint',
  description: 'Deletes the endpoint with its messages and their attempts; nothing more is sent.',
  tag: 'webhooks',
  scope: 'webhooks:write',
  params: WebhookParams,
  query: NoQuery,
  responses: { 204: { description: 'The endpoint was deleted.' } },
  errors: ['malformedWebhookId', 'webhookNotFound'],
} satisfies OperationSpec<typeof WebhookParams, typeof NoQuery, undefined>;

export const rotateWebhookSecret = {
  operationId: 'rotateWebhookSecret',
  method: 'POST',
  path: '/webhooks/{id}/rotate-secret',
  summary: 'Rotate the signing secret',
  description:
    'Makes a new signing secret, shown this once. For 24 hours the previous secret keeps ' +
    'signing beside it (two signatures in `webhook-signature`), so a receiver can switch ' +
    'to the new one without losing a message. Rotating again within those 24 hours ends ' +
    'the oldest secret at once.',
  tag: 'webhooks',
  scope: 'webhooks:write',
  params: WebhookParams,
  query: NoQuery,
  responses: {
    200: { description: 'The endpoint with its new secret.', schema: WebhookEndpointWithSecret },
  },
  errors: ['malformedWebhookId', 'webhookNotFound'],
} satisfies OperationSpec<typeof WebhookParams, typeof NoQuery, undefined>;

export const listDeliveries = {
  operationId: 'listDeliveries',
  method: 'GET',
  path: '/webhooks/{id}/deliveries',
  summary: "List an endpoint's deliveries",
  description:
    'Every message written for the endpoint, newest first, with its attempts; `status` ' +
    'keeps only those in that state. Delivered and failed messages are kept for the time ' +
    '`--webhook-retention` gives (30 days by default).',
  tag: 'webhooks',
  scope: 'webhooks:read',
  params: WebhookParams,
  query: DeliveryListQuery,
  responses: {
    200: { description: 'A page of deliveries.', schema: DeliveryList, headers: ['Link'] },
  },
  errors: ['malformedWebhookId', 'webhookNotFound'],
} satisfies OperationSpec<typeof WebhookParams, typeof DeliveryListQuery, undefined>;

export const retryDelivery = {
  operationId: 'retryDelivery',
  method: 'POST',
  path: '/webhooks/{id}/deliveries/{deliveryId}/retry',
  summary: 'Send a delivery again now',
  description:
    'Makes the message pending with one more attempt due now, whatever its state (a ' +
    'message that has failed for good too). The attempt is made while the endpoint is ' +
    'enabled, with the same `webhook-id`.',
  tag: 'webhooks',
  scope: 'webhooks:write',
  params: DeliveryParams,
  query: NoQuery,
  responses: { 202: { description: 'The attempt is due now.' } },
  errors: ['malformedWebhookId', 'webhookNotFound', 'deliveryNotFound'],
} satisfies OperationSpec<typeof DeliveryParams, typeof NoQuery, undefined>;

export const webhookOperations: readonly OperationSpec[] = [
  listWebhooks,
  createWebhook,
  getWebhook,
  updateWebhook,
  deleteWebhook,
  rotateWebhookSecret,
  listDeliveries,
  retryDelivery,
];
