// Types of requests and answers, read from the generated `paths` of the OpenAPI document.
// They are generic over the paths: operations added to the document (and regenerated with
// `npm run client`) are typed without a change here.
import type { paths } from './schema.js';

export type Paths = paths;

export type Method = 'get' | 'put' | 'post' | 'delete' | 'options' | 'head' | 'patch' | 'trace';

/** The paths that have an operation for `method`. */
export type PathsWith<M extends Method> = {
  [P in keyof Paths]: Paths[P] extends { [K in M]: object } ? P : never;
}[keyof Paths];

export type Operation<P extends keyof Paths, M extends Method> = Paths[P] extends {
  [K in M]: infer Op;
}
  ? Op
  : never;

type Parameters<Op> = Op extends { parameters: infer Params } ? Params : never;

type Present<T> = [T] extends [never] ? false : [T] extends [undefined] ? false : true;

export type PathParams<Op> = Parameters<Op> extends { path: infer Path } ? Path : never;
export type QueryParams<Op> = Parameters<Op> extends { query?: infer Query } ? Query : never;

type Content<Body> = Body extends { content: infer C } ? C[keyof C] : never;

export type RequestBody<Op> = Op extends { requestBody: infer Body } ? Content<Body> : never;

type Responses<Op> = Op extends { responses: infer R } ? R : never;

type SuccessStatus = 200 | 201 | 202 | 203 | 204 | 205 | 206;

/** The body of the operation's successful answers; undefined for those without one. */
export type SuccessBody<Op> = {
  [S in keyof Responses<Op>]: S extends SuccessStatus
    ? Responses<Op>[S] extends { content: object }
      ? Content<Responses<Op>[S]>
      : undefined
    : never;
}[keyof Responses<Op>];

/** Retrying of `429`, `503` and `409` "still being answered" (40903), which say when to. */
export interface RetryOptions {
  /** How many times in all to send the request; 1 (the default) never retries. */
  attempts: number;
  /**
   * The longest wait between attempts, in milliseconds (default 60 000). An answer that
   * asks for a longer wait is given to the caller instead of waited for.
   */
  maxDelayMs?: number;
}

/** What every request may take, whatever its operation. */
export interface CommonOptions {
  /** Sent as the `Idempotency-Key` header (a structured-field string); `true` makes one up. */
  idempotencyKey?: string | true;
  /** Sent as `If-Match`: act only if the resource still has this entity tag. */
  ifMatch?: string;
  /** The body's media type when it is not `application/json`. */
  contentType?: string;
  headers?: Record<string, string>;
  retry?: RetryOptions;
  signal?: AbortSignal;
}

/** What a request takes: path parameters and a body where the operation needs them. */
export type RequestOptions<Op> = CommonOptions &
  (Present<PathParams<Op>> extends true ? { params: PathParams<Op> } : { params?: undefined }) &
  (Present<QueryParams<Op>> extends true ? { query?: QueryParams<Op> } : { query?: undefined }) &
  (Present<RequestBody<Op>> extends true ? { body: RequestBody<Op> } : { body?: undefined });

/** A successful answer: its status, its body (ids as bigints) and its headers. */
export interface Answer<Body> {
  status: number;
  data: Body;
  headers: Headers;
}
