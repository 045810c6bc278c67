import type { FastifyInstance } from 'fastify';
import type { PlantService } from '../../service/plant-service.js';
import { createPlant, deletePlant, getPlant, listPlants, updatePlant } from '../operations.js';
import { route } from '../route.js';

export function plantRoutes(app: FastifyInstance, plants: PlantService): void {
  route(app, listPlants, async (request, reply) => {
    const { limit = 100, after, tag } = request.query;
    const page = await plants.list({ limit, after, tag });
    if (page.next !== undefined) {
      const next = new URLSearchParams({ limit: String(limit), after: String(page.next) });
      if (tag !== undefined) next.set('tag', tag);
      reply.header('link', `</plants?${next}>; rel="next"`);
    }
    return page.plants;
  });

  route(app, createPlant, async (request, reply) => {
    const plant = await plants.create(request.body);
    return reply.code(201).header('location', `/plants/${plant.id}`).send(plant);
  });

  route(app, getPlant, async (request) => plants.get(request.params.id));

  route(app, updatePlant, async (request) => plants.update(request.params.id, request.body));

  route(app, deletePlant, async (request, reply) => {
    await plants.delete(request.params.id);
    return reply.code(204).send();
  });
}
