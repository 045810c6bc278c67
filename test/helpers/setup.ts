import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import type { Scope } from '../../src/core/scopes.js';
import { type ComposeOptions, composeApp } from '../../src/cli/compose.js';
import { parseJson } from '../../src/api/json.js';
import { TokenService } from '../../src/service/token-service.js';
import { openSqliteStore } from '../../src/store/sqlite/open.js';
import type { Store } from '../../src/store/store.js';
import { OpenApiValidator } from './openapi-validator.js';

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
  /** The SQLite database file. */
  file: string;
  tokens: TokenService;
  /** The token with every scope that `call` sends by default. */
  token: string;
  /** Issues a token (all scopes unless given). */
  newToken(scopes?: Scope[], expiresInMs?: number | null): Promise<string>;
  /** Injects a request and checks the answer against the served OpenAPI document. */
  call(call: Call): Promise<LightMyRequestResponse>;
}

export function makeTempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A fresh app on a fresh SQLite database, closed when the test ends. */
export async function setup(
  t: TestContext,
  options: Omit<ComposeOptions, 'store'> = {},
): Promise<TestApp> {
  const file = join(makeTempDir(t), 'test.db');
  const store = openSqliteStore({ file });
  const app = composeApp({ ...options, store });
  t.after(async () => {
    await app.close();
    await store.close();
  });
  await app.ready();
  const tokens = new TokenService(store.tokens);
  const newToken = async (
    scopes: Scope[] = ['plants:read', 'plants:write'],
    expiresInMs: number | null = null,
  ) => (await tokens.create({ name: 'test', scopes, expiresInMs })).token;
  const token = await newToken();
  const served = await app.inject({ method: 'GET', url: '/openapi.json' });
  const validator = new OpenApiValidator(JSON.parse(served.body));

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
  return { app, store, file, tokens, token, newToken, call };
}

/** The body parsed with exact int64s. */
export function body<T = unknown>(res: { body: string }): T {
  return parseJson(res.body) as T;
}
