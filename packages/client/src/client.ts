import { stringifyBody } from './json.js';
import { nextLink } from './links.js';
import {
  buildUrl,
  type ClientOptions,
  idempotencyKeyField,
  type Prepared,
  requestHeaders,
  send,
} from './transport.js';
import type {
  Answer,
  CommonOptions,
  Method,
  Operation,
  PathsWith,
  RequestOptions,
  SuccessBody,
} from './types.js';

/** The options argument: optional when the operation needs neither parameters nor a body. */
export type OptionsArg<Op> =
  Record<string, never> extends RequestOptions<Op>
    ? [options?: RequestOptions<Op>]
    : [options: RequestOptions<Op>];

export type Page<P extends PathsWith<'get'>> = Answer<SuccessBody<Operation<P, 'get'>>> & {
  /** The next page's URL, from `Link: <...>; rel="next"`; undefined on the last page. */
  next: URL | undefined;
};

interface AnyOptions extends CommonOptions {
  params?: Record<string, unknown>;
  query?: Record<string, unknown>;
  body?: unknown;
}

function prepare(
  options: ClientOptions,
  method: Method,
  path: string,
  own: AnyOptions = {},
): Prepared {
  const key = own.idempotencyKey === true ? crypto.randomUUID() : own.idempotencyKey;
  const hasBody = own.body !== undefined;
  const headers = requestHeaders(options, {
    ...(hasBody && { 'content-type': own.contentType ?? 'application/json' }),
    ...(key !== undefined && { 'idempotency-key': idempotencyKeyField(key) }),
    ...(own.ifMatch !== undefined && { 'if-match': own.ifMatch }),
    ...own.headers,
  });
  const retry = own.retry ?? options.retry;
  return {
    method: method.toUpperCase(),
    url: buildUrl(options.baseUrl, path, own.params, own.query),
    operation: `${method.toUpperCase()} ${path}`,
    headers,
    ...(hasBody && { body: stringifyBody(own.body) }),
    ...(retry && { retry }),
    ...(own.signal && { signal: own.signal }),
  };
}

/** Refuses to send the token to another server than the one the client was made for. */
function checkSameOrigin(next: URL, options: ClientOptions): URL {
  if (next.origin !== new URL(options.baseUrl).origin) {
    throw new Error(`the next page's link leads to another server: ${next.origin}`);
  }
  return next;
}

/** The typed request layer over every operation of the document. */
export class Requests {
  constructor(readonly options: ClientOptions) {}

  /**
   * Sends one operation of the API, typed from the OpenAPI document: path parameters,
   * query, body and the answer's body, int64 values as bigints.
   *
   * @example
   * const { data, headers } = await client.request('get', '/plants/{id}', { params: { id: 42n } });
   */
  async request<M extends Method, P extends PathsWith<M>>(
    method: M,
    path: P,
    ...[own]: OptionsArg<Operation<P, M>>
  ): Promise<Answer<SuccessBody<Operation<P, M>>>> {
    const answer = await send(this.options, prepare(this.options, method, path, own as AnyOptions));
    return answer as Answer<SuccessBody<Operation<P, M>>>;
  }

  /**
   * The pages of a list operation, following `Link: <...>; rel="next"` until the last
   * page. Each page is fetched when the loop asks for it.
   */
  async *pages<P extends PathsWith<'get'>>(
    path: P,
    ...[own]: OptionsArg<Operation<P, 'get'>>
  ): AsyncGenerator<Page<P>, void, undefined> {
    let prepared = prepare(this.options, 'get', path, own as AnyOptions);
    for (;;) {
      const answer = await send(this.options, prepared);
      const next = nextLink(answer.headers.get('link'), answer.url);
      yield { ...answer, next } as unknown as Page<P>;
      if (next === undefined) return;
      prepared = { ...prepared, url: checkSameOrigin(next, this.options) };
    }
  }
}
