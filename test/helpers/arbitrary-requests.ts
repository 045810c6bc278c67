import fc from 'fast-check';
import { patchText, payload, plantText, quotedPlant } from './arbitrary-bodies.js';
import {
  authorization,
  contentType,
  extraHeaders,
  fuzzPath,
  idSegment,
  queryString,
  SEED_IDS,
} from './arbitrary-request-parts.js';

// fast-check generators of whole requests, as `inject` sends them: wild ones (every piece
// independent), focused ones (one operation, mostly well-formed) and plain valid ones, so
// the traffic both succeeds and is refused. Tokens are placeholders (`{TOKEN}`) until sent.

export interface FuzzRequest {
  method: string;
  url: string;
  /** Header name and value; values may hold `{TOKEN}` placeholders. */
  headers: [string, string][];
  payload: string | Buffer | undefined;
}

// Methods `inject` accepts: those Node knows, in upper or lower case. Inject refuses
// others itself (FOO, Patch), so those are sent raw below.
const injectMethod = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('GET', 'POST', 'PATCH', 'DELETE') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'PUT',
      'HEAD',
      'OPTIONS',
      'TRACE',
      'PROPFIND',
      'SEARCH',
      'PURGE',
      'QUERY',
      'get',
      'patch',
    ),
  },
);

export function request(
  method: string,
  url: string,
  auth: string | undefined,
  type: string | undefined,
  extra: [string, string][],
  sent: string | Buffer | undefined,
): FuzzRequest {
  const headers: [string, string][] = [];
  if (auth !== undefined) headers.push(['authorization', auth]);
  if (type !== undefined) headers.push(['content-type', type]);
  return { method, url, headers: [...headers, ...extra], payload: sent };
}

/** Everything independent: mostly nonsense, reaching the early checks. */
const wildRequest: fc.Arbitrary<FuzzRequest> = fc
  .tuple(injectMethod, fuzzPath, queryString, authorization, contentType, extraHeaders, payload)
  .map(([method, path, query, auth, type, extra, sent]) =>
    request(method, path + query, auth, type, extra, sent),
  );

const mostlyEmpty = <T>(arbitrary: fc.Arbitrary<T>, empty: T) =>
  fc.oneof({ weight: 4, arbitrary: fc.constant(empty) }, { weight: 1, arbitrary });
const mostlyValidAuth = fc.oneof(
  { weight: 6, arbitrary: fc.constant<string | undefined>('Bearer {TOKEN}') },
  { weight: 1, arbitrary: authorization },
);
const noExtra: [string, string][] = [];
/** Mostly the id of a plant that exists, so that reads, updates and deletes succeed too. */
const focusedId = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...SEED_IDS).map(String) },
  { weight: 1, arbitrary: idSegment },
);

/** One operation at a time, mostly well-formed, so the later checks are reached too. */
export const focusedRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  fc
    .tuple(queryString, mostlyValidAuth, mostlyEmpty(payload, undefined))
    .map(([query, auth, sent]) =>
      request('GET', `/plants${query}`, auth, undefined, noExtra, sent),
    ),
  fc
    .tuple(
      mostlyEmpty(queryString, ''),
      mostlyValidAuth,
      mostlyEmpty(contentType, 'application/json'),
      fc.oneof({ weight: 3, arbitrary: plantText }, { weight: 2, arbitrary: payload }),
    )
    .map(([query, auth, type, sent]) =>
      request('POST', `/plants${query}`, auth, type, noExtra, sent),
    ),
  fc
    .tuple(
      fc.constantFrom('GET', 'DELETE'),
      focusedId,
      mostlyEmpty(queryString, ''),
      mostlyValidAuth,
      mostlyEmpty(payload, undefined),
    )
    .map(([method, id, query, auth, sent]) =>
      request(method, `/plants/${id}${query}`, auth, undefined, noExtra, sent),
    ),
  fc
    .tuple(
      focusedId,
      mostlyEmpty(queryString, ''),
      mostlyValidAuth,
      fc.oneof(
        {
          weight: 4,
          arbitrary: fc.constantFrom('application/merge-patch+json', 'application/json'),
        },
        { weight: 1, arbitrary: contentType },
      ),
      fc.oneof({ weight: 3, arbitrary: patchText }, { weight: 2, arbitrary: payload }),
    )
    .map(([id, query, auth, type, sent]) =>
      request('PATCH', `/plants/${id}${query}`, auth, type, noExtra, sent),
    ),
  fc
    .tuple(
      fc.constantFrom('/healthz', '/readyz', '/openapi.json', '/docs', '/docs/swagger-ui.css'),
      mostlyEmpty(queryString, ''),
      mostlyEmpty(authorization, undefined),
      mostlyEmpty(payload, undefined),
      extraHeaders,
    )
    .map(([path, query, auth, sent, extra]) =>
      request('GET', path + query, auth, undefined, extra, sent),
    ),
);

/** A name any plant may have: letters and spaces, not blank. */
const plainName = fc
  .string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz ABC-'), maxLength: 30 })
  .map((text) => `p${text}`);
const seedId = fc.constantFrom(...SEED_IDS).map(String);
const asked = (method: string, url: string, type?: string, sent?: string) =>
  request(method, url, 'Bearer {TOKEN}', type, noExtra, sent);

/** Plain valid calls of each plant operation: the traffic must succeed, not only be refused. */
export const validRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  fc.constant(asked('GET', '/plants')),
  plainName.map((name) => asked('POST', '/plants', 'application/json', quotedPlant(name))),
  seedId.map((id) => asked('GET', `/plants/${id}`)),
  fc
    .tuple(seedId, plainName)
    .map(([id, name]) =>
      asked('PATCH', `/plants/${id}`, 'application/merge-patch+json', quotedPlant(name)),
    ),
  seedId.map((id) => asked('DELETE', `/plants/${id}`)),
);

export const injectRequest = fc.oneof(
  { weight: 3, arbitrary: focusedRequest },
  { weight: 2, arbitrary: wildRequest },
  { weight: 1, arbitrary: validRequest },
);

function preview(sent: string | Buffer | undefined): string {
  if (sent === undefined) return '(no body)';
  if (typeof sent === 'string') {
    const bytes = Buffer.byteLength(sent);
    return `${JSON.stringify(sent.slice(0, 400))}${sent.length > 400 ? '...' : ''} (${bytes} bytes)`;
  }
  return `<Buffer ${sent.subarray(0, 200).toString('hex')}${sent.length > 200 ? '...' : ''}> (${sent.length} bytes)`;
}

export function renderRequest(req: FuzzRequest): string {
  const url =
    req.url.length > 300 ? `${req.url.slice(0, 300)}... (${req.url.length} chars)` : req.url;
  const lines = [`${req.method} ${JSON.stringify(url)}`];
  for (const [name, value] of req.headers)
    lines.push(`${name}: ${JSON.stringify(value.slice(0, 300))}`);
  lines.push('', preview(req.payload));
  return lines.join('\n');
}

export type Tokens = Record<'TOKEN' | 'READ_TOKEN' | 'WRITE_TOKEN' | 'EXPIRED_TOKEN', string>;

export const withTokens = (text: string, tokens: Tokens): string =>
  text.replace(
    /\{(TOKEN|READ_TOKEN|WRITE_TOKEN|EXPIRED_TOKEN)\}/g,
    (_m, name: keyof Tokens) => tokens[name],
  );
