import type { FastifyInstance } from 'fastify';
import type { Delivery } from '../../../core/webhooks/endpoint.js';
import { WEBHOOK_LIMITS } from '../../../core/webhooks/endpoint.js';
import type { WebhookService } from '../../../service/webhook-service.js';
import { parseJson } from '../../../api/json.js';
import { listDeliveries, retryDelivery } from '../../../api/webhook-operations.js';
import { route } from '../route.js';

/** The attempt log of an endpoint, and the retry of one message. */
export function webhookDeliveryRoutes(app: FastifyInstance, webhooks: WebhookService): void {
  route(app, listDeliveries, async (request, reply) => {
    const { limit = WEBHOOK_LIMITS.listDefault, after, status } = request.query;
    const endpointId = request.params.id;
    const page = await webhooks.deliveries({
      endpointId,
      limit,
      ...(after !== undefined && { after }),
      ...(status !== undefined && { status }),
    });
    if (page.next !== undefined) {
      const statusParam = status === undefined ? '' : `&status=${status}`;
      reply.header(
        'link',
        `</webhooks/${endpointId}/deliveries?limit=${limit}&after=${page.next}${statusParam}>; rel="next"`,
      );
    }
    return page.items.map(shown);
  });

  route(app, retryDelivery, async (request, reply) => {
    await webhooks.retry(request.params.id, request.params.deliveryId);
    return reply.code(202).send();
  });
}

/** A delivery as the API shows it: the payload as the JSON it is, ids exact (bigint). */
const shown = (delivery: Delivery) => ({ ...delivery, payload: parseJson(delivery.payload) });
