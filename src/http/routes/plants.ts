import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { etagOf, type IfMatch, unchanged } from '../../core/etag.js';
import { PLANT_LIMITS, type StoredPlant } from '../../core/plant.js';
import type { PlantService, Writer } from '../../service/plant-service.js';
import { idempotencyKeyOf } from '../../api/idempotency-key.js';
import {
  createPlant,
  deletePlant,
  getPlant,
  listPlants,
  updatePlant,
} from '../../api/operations.js';
import { parseIfMatch, parseIfNoneMatch } from '../../api/preconditions.js';
import { tokenOf } from '../hooks/auth.js';
import { route } from './route.js';

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
    // The page comes as its JSON text (PlantListing), which Fastify sends as it is.
    return reply.type('application/json').send(page.json);
  });

  route(app, createPlant, async (request, reply) => {
    const key = idempotencyKeyOf(request.headers, request.raw.rawHeaders);
    const { plant, replayed } = await plants.create(request.body, writer(request), key);
    if (replayed) reply.header('idempotent-replayed', 'true');
    return reply
      .code(201)
      .header('location', `/plants/${plant.id}`)
      .header('etag', etagOf(plant))
      .send(plant);
  });

  // Not async: on SQLite the plant comes at once and is sent before the handler returns,
  // with no promise between the read and the socket (the hottest read; bench/HISTORY.md).
  route(app, getPlant, (request, reply) => {
    const ifNoneMatch = parseIfNoneMatch(request.headers['if-none-match']);
    const plant = plants.get(request.params.id);
    if (plant instanceof Promise) return plant.then((p) => sendPlant(reply, p, ifNoneMatch));
    sendPlant(reply, plant, ifNoneMatch);
    return undefined;
  });

  route(app, updatePlant, async (request, reply) => {
    const ifMatch = parseIfMatch(request.headers['if-match']);
    const plant = await plants.update(request.params.id, request.body, writer(request), ifMatch);
    return reply.header('etag', etagOf(plant)).send(plant);
  });

  route(app, deletePlant, async (request, reply) => {
    const ifMatch = parseIfMatch(request.headers['if-match']);
    await plants.delete(request.params.id, writer(request), ifMatch);
    return reply.code(204).send();
  });
}

/** A plant read, with its ETag; 304 when the client has this representation already. */
function sendPlant(reply: FastifyReply, plant: StoredPlant, ifNoneMatch: IfMatch | undefined) {
  const etag = etagOf(plant);
  reply.header('etag', etag);
  // RFC 9110 §13.1.2: no body.
  if (ifNoneMatch !== undefined && unchanged(ifNoneMatch, etag)) reply.code(304).send();
  else reply.send(plant);
}

/** Who a write is for: the token the request was authenticated with (see auth.ts). */
function writer(request: FastifyRequest): Writer {
  return { tokenId: tokenOf(request).id, requestId: request.id };
}
