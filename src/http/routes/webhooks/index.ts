import type { FastifyInstance } from 'fastify';
import type { WebhookService } from '../../../service/webhook-service.js';
import { webhookDeliveryRoutes } from './deliveries.js';
import { webhookEndpointRoutes } from './endpoints.js';

export function webhookRoutes(app: FastifyInstance, webhooks: WebhookService): void {
  webhookEndpointRoutes(app, webhooks);
  webhookDeliveryRoutes(app, webhooks);
}
