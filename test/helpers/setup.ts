import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import type { Scope } from '../../src/core/scopes.js';
import { type ComposeOptions, composeApp } from '../../src/server/compose.js';
import { parseJson } from '../../src/api/json.js';
import { TokenService } from '../../src/service/token-service.js';
import type { Store } from '../../src/store/store.js';
import {
  type Backend,
  forEachBackend as eachBackend,
  sqliteDatabase,
  type TestDatabase,
} from './backends.js';
import { OpenApiValidator } from './openapi-validator.js';
import { makeTempDir } from './temp-dir.js';

export { makeTempDir };

export interface Call extends Omit<InjectOptions, 'url' | 'method'> {
  method: string;
  url: string;
  /** Token to send as `Bearer <token>`; the default token when omitted, none when null. */
  token?: string | null;
  /** A raw JSON text body, sent as application/json unless a content-type is given. */
  json?: string;
}

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  /** The database the app is on: `database.args` names it to the CLI. */
  database: TestDatabase;
  /** Issues and revokes tokens on the app's database (and clock), as the CLI would. */
  tokens: TokenService;
  /** The token with every scope that `call` sends by default. */
  token: string;
  /** Issues a token (all scopes unless given). */
  newToken(scopes?: Scope[], expiresInMs?: number | null): Promise<string>;
  /** Injects a request and checks the answer against the served OpenAPI document. */
  call(call: Call): Promise<LightMyRequestResponse>;
}

export interface SqliteTestApp extends TestApp {
  /** The SQLite database file. */
  file: string;
}

export type AppOptions = Omit<ComposeOptions, 'store'>;

/** A fresh app on a fresh database, closed when the test ends. */
export type Setup = (t: TestContext, options?: AppOptions) => Promise<TestApp>;

/** A fresh app on a fresh SQLite database, closed when the test ends. */
export async function setup(t: TestContext, options: AppOptions = {}): Promise<SqliteTestApp> {
  const file = join(makeTempDir(t), 'test.db');
  return { ...(await start(t, options, sqliteDatabase(t, file))), file };
}

/** `setup` on a fresh database of `backend` (a SQLite file, a PostgreSQL schema). */
export const setupOn =
  (backend: Backend): Setup =>
  async (t, options = {}) => {
    return start(t, options, await backend.fresh(t));
  };

/**
 * The backend loop of backends.ts for suites of the app: each backend comes with the `setup`
 * the suite's tests call, an app on a fresh database of that backend.
 */
export function forEachBackend(suite: (backend: Backend & { setup: Setup }) => void): void {
  eachBackend((backend) => suite({ ...backend, setup: setupOn(backend) }));
}

async function start(
  t: TestContext,
  options: AppOptions,
  database: TestDatabase,
): Promise<TestApp> {
  // Registered before the store opens, so it runs before the store's own close: the app
  // closes first, on a store still open.
  const opened: { app?: FastifyInstance; store?: Store } = {};
  t.after(async () => {
    await opened.app?.close();
    await opened.store?.close();
  });
  const store = (opened.store = await database.open());
  const app = (opened.app = composeApp({ ...options, store }));
  await app.ready();
  // On the app's clock, if the test gave one: a token lives by the time the app sees.
  const { now } = options;
  const tokens = new TokenService(store.tokens, now && { now: () => new Date(now()) });
  const newToken = async (
    scopes: Scope[] = ['plants:read', 'plants:write'],
    expiresInMs: number | null = null,
  ) => (await tokens.create({ name: 'test', scopes, expiresInMs })).token;
  const token = await newToken();
  const served = await app.inject({ method: 'GET', url: '/openapi.json' });
  const validator = validatorFor(served.body);

  const call = async ({ token: given, json, headers, ...rest }: Call) => {
    const sent = given === undefined ? token : given;
    const options = {
      ...rest,
      headers: {
        ...(sent !== null && { authorization: `Bearer ${sent}` }),
        ...(json !== undefined && { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(json !== undefined && { payload: json }),
    } as InjectOptions;
    const res = await app.inject(options);
    validator.check(rest.method, rest.url, res);
    return res;
  };
  return { app, store, database, tokens, token, newToken, call };
}

/**
 * The validator of a served document, one per document text in the test process: its
 * schemas are compiled once, not again for every app the tests start. (The document only
 * changes with the app's options; a validator is read-only once made.)
 */
const validators = new Map<string, OpenApiValidator>();
function validatorFor(document: string): OpenApiValidator {
  let validator = validators.get(document);
  if (validator === undefined) {
    validator = new OpenApiValidator(JSON.parse(document));
    validators.set(document, validator);
  }
  return validator;
}

/** The body parsed with exact int64s. */
export function body<T = unknown>(res: { body: string }): T {
  return parseJson(res.body) as T;
}
