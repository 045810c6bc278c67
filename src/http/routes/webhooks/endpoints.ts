import type { FastifyInstance } from 'fastify';
import { WEBHOOK_LIMITS } from '../../../core/webhooks/endpoint.js';
import type { WebhookService, WithSecret } from '../../../service/webhook-service.js';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listWebhooks,
  rotateWebhookSecret,
  updateWebhook,
} from '../../../api/webhook-operations.js';
import { route } from '../route.js';

/** The subscription routes: endpoints, their secrets. */
export function webhookEndpointRoutes(app: FastifyInstance, webhooks: WebhookService): void {
  route(app, listWebhooks, async (request, reply) => {
    const { limit = WEBHOOK_LIMITS.listDefault, after } = request.query;
    const page = await webhooks.list({ limit, ...(after !== undefined && { after }) });
    if (page.next !== undefined) {
      reply.header('link', `</webhooks?limit=${limit}&after=${page.next}>; rel="next"`);
    }
    return page.items;
  });

  route(app, createWebhook, async (request, reply) => {
    const { url, events, description } = request.body;
    const created = await webhooks.create({
      url,
      ...(events !== undefined && { events }),
      ...(description !== undefined && { description }),
    });
    return reply
      .code(201)
      .header('location', `/webhooks/${created.endpoint.id}`)
      .send(withSecret(created));
  });

  route(app, getWebhook, async (request) => webhooks.get(request.params.id));

  route(app, updateWebhook, async (request) => webhooks.update(request.params.id, request.body));

  route(app, deleteWebhook, async (request, reply) => {
    await webhooks.delete(request.params.id);
    return reply.code(204).send();
  });

  route(app, rotateWebhookSecret, async (request) =>
    withSecret(await webhooks.rotateSecret(request.params.id)),
  );
}

const withSecret = ({ endpoint, secret }: WithSecret) => ({ ...endpoint, secret });
