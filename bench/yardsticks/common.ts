/**
 * What the yardsticks share: plantstore's answers to the four benchmarked operations and
 * their refusals (same statuses, bodies and headers a client relies on), with none of
 * plantstore's features. A yardstick must do the work a client cannot do without, and
 * nothing more, or the ratio to it stops measuring the features' cost.
 */

/** One answer, written the same way by the node:http and the Fastify yardsticks. */
export interface Answer {
  status: number;
  body?: string;
  headers: Record<string, string>;
}

// Bodies end with a newline, as plantstore's do: the probe compares them byte for byte.
const json = (status: number, body: string, headers: Record<string, string> = {}): Answer => ({
  status,
  body: `${body}\n`,
  headers: { ...headers, 'content-type': 'application/json; charset=utf-8' },
});

export const failure = (
  status: number,
  code: number,
  message: string,
  headers: Record<string, string> = {},
): Answer => json(status, JSON.stringify({ error: code, message }), headers);

export const NOT_FOUND = failure(404, 40402, 'No such resource.');
export const BAD_ID = failure(400, 40001, 'The plant id must be a decimal int64.');
export const BAD_QUERY = failure(400, 40002, 'A query parameter is missing, unknown or invalid.');
export const BAD_JSON = failure(400, 40003, 'The request body is not well-formed JSON.');
export const BAD_PLANT = failure(400, 40004, 'The request body does not match the schema.');
export const NO_BODY = failure(400, 40005, 'This operation takes no request body.');
export const TOO_LARGE = failure(413, 41301, 'The request body is larger than the limit.');
export const MEDIA_TYPE = failure(415, 41501, 'The request body has an unsupported media type.');
export const UNAVAILABLE = failure(503, 50301, 'The database is unavailable.', {
  'retry-after': '1',
});
export const INTERNAL = failure(500, 50001, 'An unexpected error occurred.');
export const HEALTHY = json(200, '{"status":"ok"}');
export const MAX_BODY = 64 * 1024;

export const noPlant = (id: bigint | string): Answer =>
  failure(404, 40401, `No plant has id ${id}.`);

/** A plant as the database gives it: the id exact, as a bigint (SQLite) or digits (pg). */
export interface PlantRow {
  id: bigint | string;
  name: string;
  tag: string | null;
}

export const plantJson = (p: PlantRow): string =>
  `{"id":${p.id},"name":${JSON.stringify(p.name)}` +
  (p.tag === null ? '}' : `,"tag":${JSON.stringify(p.tag)}}`);

export const plantAnswer = (p: PlantRow): Answer => json(200, plantJson(p));
export const createdAnswer = (p: PlantRow): Answer =>
  json(201, plantJson(p), { location: `/plants/${p.id}` });
export const DELETED: Answer = { status: 204, headers: {} };

/**
 * One page of the list; `rows` holds one row more than `limit` when another page follows.
 * The next page's link keeps the tag filter, encoded as plantstore encodes it.
 */
export function pageAnswer(rows: PlantRow[], limit: number, tag?: string): Answer {
  const headers: Record<string, string> = {};
  if (rows.length > limit) {
    rows.length = limit;
    const tagParam = tag === undefined ? '' : `&tag=${encodeURIComponent(tag)}`;
    headers.link = `</plants?limit=${limit}&after=${rows[limit - 1]!.id}${tagParam}>; rel="next"`;
  }
  return json(200, `[${rows.map(plantJson).join(',')}]`, headers);
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const CANONICAL_DECIMAL = /^(?:0|-?[1-9][0-9]{0,18})$/;

export function parseInt64(text: string): bigint | undefined {
  if (!CANONICAL_DECIMAL.test(text)) return undefined;
  const value = BigInt(text);
  return value >= INT64_MIN && value <= INT64_MAX ? value : undefined;
}

/** A list query: a page of `limit` plants after `after`, only those tagged `tag` if given. */
export interface ListQuery {
  limit: number;
  after?: bigint;
  tag?: string;
}

/**
 * `limit` (1..1000, default 100), `after` and `tag` (1..50 characters) of a list query, or
 * undefined if invalid.
 */
export function parseListQuery(query: string): ListQuery | undefined {
  const page: ListQuery = { limit: 100 };
  for (const [key, value] of new URLSearchParams(query)) {
    const n = parseInt64(value);
    if (key === 'limit' && n !== undefined && n >= 1n && n <= 1000n) page.limit = Number(n);
    else if (key === 'after' && n !== undefined) page.after = n;
    else if (key === 'tag' && value.length >= 1 && value.length <= 50) page.tag = value;
    else return undefined;
  }
  return page;
}

/** A create body: `name` 1..100 characters, not blank; `tag` 1..50; nothing else. */
export function validPlant(value: unknown): value is { name: string; tag?: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { name, tag, ...rest } = value as Record<string, unknown>;
  return (
    Object.keys(rest).length === 0 &&
    typeof name === 'string' &&
    name.length >= 1 &&
    name.length <= 100 &&
    name.trim() !== '' &&
    (tag === undefined || (typeof tag === 'string' && tag.length >= 1 && tag.length <= 50))
  );
}

export const isJsonType = (contentType: string | undefined): boolean =>
  contentType?.split(';')[0]?.trim().toLowerCase() === 'application/json';

const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*)$/i;
const REALM = 'Bearer realm="plantstore"';

/** A token row as the yardsticks read them at start: only usable tokens are kept. */
export interface TokenGrant {
  hash: string;
  scopes: string;
}

/**
 * Bearer tokens checked in memory: the usable tokens' hashes are read once at start, and a
 * token seen once is then known by itself, so a request costs a regular expression and a
 * map lookup (plantstore's token cache does the same, and re-reads every 2 s).
 */
export class TokenCheck {
  private readonly byHash: Map<string, string[]>;
  private readonly known = new Map<string, string[]>();

  constructor(
    grants: TokenGrant[],
    private readonly hash: (token: string) => string,
  ) {
    this.byHash = new Map(grants.map((g) => [g.hash, g.scopes.split(' ')]));
  }

  /** The scopes of a usable token, hashed once and then known by itself; else undefined. */
  scopesOf(token: string): string[] | undefined {
    let scopes = this.known.get(token);
    if (scopes === undefined) {
      scopes = this.byHash.get(this.hash(token));
      if (scopes !== undefined) this.known.set(token, scopes);
    }
    return scopes;
  }

  /** undefined when the request may proceed; otherwise the 401 or 403 to send. */
  refusal(authorization: string | undefined, scope: string): Answer | undefined {
    const token = BEARER.exec(authorization ?? '')?.[1];
    if (token === undefined) {
      return failure(401, 40102, 'Send the header "Authorization: Bearer <ACCESS_TOKEN>".', {
        'www-authenticate': REALM,
      });
    }
    const scopes = this.scopesOf(token);
    if (scopes === undefined) {
      return failure(401, 40101, 'The access token is unknown, revoked or expired.', {
        'www-authenticate': `${REALM}, error="invalid_token"`,
      });
    }
    if (scopes.includes(scope)) return undefined;
    return failure(403, 40301, `This operation needs the scope "${scope}".`, {
      'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
    });
  }
}

/** The database error codes that mean "unavailable" rather than a bug (503, not 500). */
export const UNAVAILABLE_CODE =
  /^(?:SQLITE_(?:BUSY|LOCKED|IOERR|CANTOPEN|FULL|READONLY)|57P0[1-3]|08)/;

/** Runs a SQLite statement, answering 503 when the database cannot be used, 500 otherwise. */
export function guarded(work: () => Answer): Answer {
  try {
    return work();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' && UNAVAILABLE_CODE.test(code) ? UNAVAILABLE : INTERNAL;
  }
}
