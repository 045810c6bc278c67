import { Type } from '@sinclair/typebox';
import type { OperationSpec } from './operation.js';
import { eventOperations } from './event-operations.js';
import { webhookOperations } from './webhook-operations.js';
import {
  Health,
  ListQuery,
  NewPlant,
  NoQuery,
  Plant,
  PlantList,
  PlantParams,
  PlantPatch,
} from './schemas.js';

const JSON_TYPES = ['application/json'];

export const listPlants = {
  operationId: 'listPlants',
  method: 'GET',
  path: '/plants',
  summary: 'List plants',
  description:
    'Plants in ascending id order, one page at a time. When more plants follow, the ' +
    '`Link` header carries the URL of the next page (`rel="next"`); follow it until it is absent.',
  tag: 'plants',
  scope: 'plants:read',
  query: ListQuery,
  responses: {
    200: {
      description: 'A page of plants (possibly empty).',
      schema: PlantList,
      headers: ['Link'],
    },
  },
  errors: [],
} satisfies OperationSpec<undefined, typeof ListQuery, undefined>;

export const createPlant = {
  operationId: 'createPlant',
  method: 'POST',
  path: '/plants',
  summary: 'Create a plant',
  description:
    'Creates a plant with the id given or, when none is given, with an id the server ' +
    'assigns: it counts on from the last id it assigned, skipping every id a client took ' +
    '(even once that plant is deleted), so it never hands out the id of a plant that exists ' +
    'or existed. A plant with the same id already existing is `409`. With ' +
    '`Idempotency-Key`, a retry with the same key and body gets the first answer again ' +
    '(marked `Idempotent-Replayed: true`) instead of creating a second plant.',
  tag: 'plants',
  scope: 'plants:write',
  query: NoQuery,
  body: {
    schema: NewPlant,
    mediaTypes: JSON_TYPES,
    examples: {
      assigned: {
        summary: 'The server assigns the id',
        value: { name: 'Fern', tag: 'shade' },
      },
      chosen: {
        summary: 'An id of your own',
        value: { id: 42, name: 'Monstera', tag: 'tropical' },
      },
      untagged: { summary: 'No tag', value: { name: 'Aloe' } },
    },
  },
  responses: {
    201: {
      description: 'The plant was created.',
      schema: Plant,
      headers: ['Location', 'ETag', 'Idempotent-Replayed'],
    },
  },
  errors: ['plantExists', 'idsExhausted'],
  idempotent: true,
} satisfies OperationSpec<undefined, typeof NoQuery, typeof NewPlant>;

export const getPlant = {
  operationId: 'getPlant',
  method: 'GET',
  path: '/plants/{id}',
  summary: 'Read a plant',
  description: 'The plant with this id.',
  tag: 'plants',
  scope: 'plants:read',
  params: PlantParams,
  query: NoQuery,
  requestHeaders: [
    {
      name: 'If-None-Match',
      description:
        '`*` or entity tags from `ETag`: if the plant still has one of them (weak ' +
        'comparison), `304` with no body instead of the plant. Malformed: `400` (40007).',
    },
  ],
  responses: {
    200: { description: 'The plant.', schema: Plant, headers: ['ETag'] },
    304: {
      description: 'Not modified: the plant still has an entity tag given in If-None-Match.',
      headers: ['ETag'],
    },
  },
  errors: ['malformedPlantId', 'plantNotFound', 'malformedPrecondition'],
} satisfies OperationSpec<typeof PlantParams, typeof NoQuery, undefined>;

export const updatePlant = {
  operationId: 'updatePlant',
  method: 'PATCH',
  path: '/plants/{id}',
  summary: 'Update a plant',
  description:
    'Applies a JSON merge patch (RFC 7396) to the name and tag: fields left out are kept, ' +
    '`"tag": null` removes the tag. The id cannot be changed. With `If-Match`, only if the ' +
    'plant still has one of the entity tags given (`412` otherwise). An empty patch (`{}`) ' +
    'writes nothing: the answer is the plant as it is, with its entity tag unchanged.',
  tag: 'plants',
  scope: 'plants:write',
  params: PlantParams,
  query: NoQuery,
  body: {
    schema: PlantPatch,
    mediaTypes: ['application/merge-patch+json', 'application/json'],
    examples: {
      rename: { summary: 'A new name, the tag kept', value: { name: 'Swiss cheese plant' } },
      retag: { summary: 'A new tag', value: { tag: 'sun' } },
      untag: { summary: 'The tag removed', value: { tag: null } },
    },
  },
  responses: {
    200: { description: 'The plant as updated.', schema: Plant, headers: ['ETag'] },
  },
  errors: ['malformedPlantId', 'plantNotFound'],
  conditional: true,
} satisfies OperationSpec<typeof PlantParams, typeof NoQuery, typeof PlantPatch>;

export const deletePlant = {
  operationId: 'deletePlant',
  method: 'DELETE',
  path: '/plants/{id}',
  summary: 'Delete a plant',
  description:
    'Deletes the single plant identified by the id supplied. With `If-Match`, only if the ' +
    'plant still has one of the entity tags given (`412` otherwise).',
  tag: 'plants',
  scope: 'plants:write',
  params: PlantParams,
  query: NoQuery,
  responses: { 204: { description: 'The plant was deleted.' } },
  errors: ['malformedPlantId', 'plantNotFound'],
  conditional: true,
} satisfies OperationSpec<typeof PlantParams, typeof NoQuery, undefined>;

export const getHealth = {
  operationId: 'getHealth',
  method: 'GET',
  path: '/healthz',
  summary: 'Liveness',
  description: 'Answers 200 while the process is serving requests.',
  tag: 'operations',
  scope: null,
  query: NoQuery,
  responses: { 200: { description: 'The process is alive.', schema: Health } },
  errors: [],
} satisfies OperationSpec<undefined, typeof NoQuery, undefined>;

export const getReadiness = {
  operationId: 'getReadiness',
  method: 'GET',
  path: '/readyz',
  summary: 'Readiness',
  description: 'Answers 200 when the database answers, 503 when it does not.',
  tag: 'operations',
  scope: null,
  query: NoQuery,
  responses: { 200: { description: 'Ready to serve requests.', schema: Health } },
  errors: ['storeUnavailable'],
} satisfies OperationSpec<undefined, typeof NoQuery, undefined>;

export const getOpenApi = {
  operationId: 'getOpenApi',
  method: 'GET',
  path: '/openapi.json',
  summary: 'This OpenAPI document',
  description: 'The OpenAPI 3.1 description of this API, as served.',
  tag: 'operations',
  scope: null,
  query: NoQuery,
  responses: {
    200: {
      description: 'The OpenAPI document.',
      schema: Type.Object({}, { additionalProperties: true }),
    },
  },
  errors: [],
} satisfies OperationSpec<undefined, typeof NoQuery, undefined>;

export const getDocs = {
  operationId: 'getDocs',
  method: 'GET',
  path: '/docs',
  summary: 'Interactive API reference',
  description: 'An HTML page (Swagger UI) for reading and trying this API; served without a CDN.',
  tag: 'operations',
  scope: null,
  query: NoQuery,
  responses: {
    200: { description: 'The reference page.', schema: Type.String(), mediaType: 'text/html' },
  },
  errors: [],
} satisfies OperationSpec<undefined, typeof NoQuery, undefined>;

export const DocsAssetParams = Type.Object(
  {
    file: Type.String({
      description: 'swagger-ui.css, swagger-ui-bundle.js or lossless-json.js',
    }),
  },
  { additionalProperties: false },
);

export const getDocsAsset = {
  operationId: 'getDocsAsset',
  method: 'GET',
  path: '/docs/{file}',
  summary: 'Asset of the API reference page',
  description: 'Scripts and style sheet of the reference page.',
  tag: 'operations',
  scope: null,
  params: DocsAssetParams,
  query: NoQuery,
  responses: {
    200: {
      description: 'The asset.',
      schema: Type.String(),
      mediaType: ['text/css', 'text/javascript'],
    },
  },
  errors: ['routeNotFound'],
} satisfies OperationSpec<typeof DocsAssetParams, typeof NoQuery, undefined>;

// The root and /docs/ only send a reader on to the reference page. The root's redirect is
// temporary (302): the root may one day answer something of its own, and browsers keep a
// permanent redirect for good. /docs/ is the same page as /docs for good, so that one is
// permanent (308, which unlike 301 never turns a method into GET).

export const getRoot = {
  operationId: 'getRoot',
  method: 'GET',
  path: '/',
  summary: 'Where to start',
  description: 'Redirects to the API reference page, `/docs`.',
  tag: 'operations',
  scope: null,
  query: NoQuery,
  responses: {
    302: { description: 'Found: the reference page is at `/docs`.', headers: ['Location'] },
  },
  errors: [],
} satisfies OperationSpec<undefined, typeof NoQuery, undefined>;

export const getDocsSlash = {
  operationId: 'getDocsSlash',
  method: 'GET',
  path: '/docs/',
  summary: 'The API reference page, with a trailing slash',
  description: 'Redirects for good to `/docs`, the address of the reference page.',
  tag: 'operations',
  scope: null,
  query: NoQuery,
  responses: {
    308: { description: 'Permanent Redirect: the page is at `/docs`.', headers: ['Location'] },
  },
  errors: [],
} satisfies OperationSpec<undefined, typeof NoQuery, undefined>;

/** Every operation the server routes, in the order the document lists them. */
export const operations: readonly OperationSpec[] = [
  listPlants,
  createPlant,
  getPlant,
  updatePlant,
  deletePlant,
  ...webhookOperations,
  ...eventOperations,
  getHealth,
  getReadiness,
  getOpenApi,
  getDocs,
  getDocsAsset,
  getRoot,
  getDocsSlash,
];
