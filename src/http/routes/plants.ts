import type { FastifyInstance } from 'fastify';
import { etagOf } from '../../core/etag.js';
import { PLANT_LIMITS } from '../../core/plant.js';
import type { PlantService } from '../../service/plant-service.js';
import { createPlant, deletePlant, getPlant, listPlants, updatePlant } from '../operations.js';
import { parseIfMatch } from '../preconditions.js';
import { route } from '../route.js';

export function plantRoutes(app: FastifyInstance, plants: PlantService): void {
  route(app, listPlants, async (request, reply) => {
    const { limit = PLANT_LIMITS.listDefault, after, tag } = request.query;
    const page = await plants.list({ limit, after, tag });
    if (page.next !== undefined) {
      // encodeURIComponent, not URLSearchParams: a space must be %20, since `+` means a
      // space only to form decoders, not to RFC 3986 clients following the link.
      const tagParam = tag === undefined ? '' : `&tag=${encodeURIComponent(tag)}`;
      reply.header('link', `</plants?limit=${limit}&after=${page.next}${tagParam}>; rel="next"`);
    }
    return page.plants;
  });

  route(app, createPlant, async (request, reply) => {
    const plant = await plants.create(request.body);
    return reply
      .code(201)
      .header('location', `/plants/${plant.id}`)
      .header('etag', etagOf(plant))
      .send(plant);
  });

  route(app, getPlant, async (request, reply) => {
    const plant = await plants.get(request.params.id);
    return reply.header('etag', etagOf(plant)).send(plant);
  });

  route(app, updatePlant, async (request, reply) => {
    const ifMatch = parseIfMatch(request.headers['if-match']);
    const plant = await plants.update(request.params.id, request.body, ifMatch);
    return reply.header('etag', etagOf(plant)).send(plant);
  });

  route(app, deletePlant, async (request, reply) => {
    await plants.delete(request.params.id, parseIfMatch(request.headers['if-match']));
    return reply.code(204).send();
  });
}
