import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import fc from 'fast-check';
import type { InjectOptions } from 'fastify';
import { TokenService } from '../../src/service/token-service.js';
import { rawBytes, rawRequest, renderRaw } from '../helpers/arbitrary-raw-requests.js';
import { SEED_IDS } from '../helpers/arbitrary-request-parts.js';
import {
  type FuzzRequest,
  injectRequest,
  renderRequest,
  type Tokens,
  withTokens,
} from '../helpers/arbitrary-requests.js';
import { exchange, HEALTH_REQUEST, parseAnswers } from '../helpers/raw-http.js';
import { body, setup, type TestApp } from '../helpers/setup.js';

// An HTTP fuzzer over every operation: random methods, paths, query strings, headers and
// bodies, first through `inject` (Fastify's whole request lifecycle), then as raw bytes
// to a listening server (Node's HTTP parser too). For every answer:
//   - the status is never 5xx, but 505 for an HTTP version other than 1.0 and 1.1;
//   - every 4xx carries exactly {"error": <int32 integer>, "message": <non-empty string>}
//     with Math.trunc(error / 100) === status (HEAD answers carry no body, by HTTP);
//   - a 405 names the methods that are allowed, and not the one refused;
//   - GET /healthz still answers 200 afterwards (and the listener is still up).
// Requests `call()` can check are also validated against the served OpenAPI document.
// The requests come from the generators in test/helpers/arbitrary-*.ts.
// And of the traffic as a whole: each plant operation both succeeded (2xx) and was refused
// (4xx), so generators that stopped producing valid (or invalid) requests do not pass.
//
// Bounded and deterministic: a fixed seed and a fixed number of runs. To reproduce or
// explore, set FUZZ_SEED (an integer) and/or FUZZ_RUNS (runs of the inject fuzzer; the raw
// one does a quarter as many). A failure names the seed, the shrunk request and the error.

const DEFAULT_SEED = 20_240_611;
const DEFAULT_INJECT_RUNS = 2_000;

function envInteger(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got ${text}`);
  return value;
}

const SEED = envInteger('FUZZ_SEED', DEFAULT_SEED);
const INJECT_RUNS = envInteger('FUZZ_RUNS', DEFAULT_INJECT_RUNS);
const RAW_RUNS = Math.max(1, Math.round(INJECT_RUNS / 4));

const INT32_MIN = -(2n ** 31n);
const INT32_MAX = 2n ** 31n - 1n;

// ------------------------------------------------------------------ the fuzz runner

/**
 * Runs a property with the fixed seed; on failure, fails the test with the seed, the
 * shrunk counterexample (rendered as a request) and the error it produced.
 */
async function fuzz<T>(
  t: TestContext,
  name: string,
  arbitrary: fc.Arbitrary<T>,
  numRuns: number,
  predicate: (value: T) => Promise<void>,
  render: (value: T) => string,
): Promise<void> {
  const started = performance.now();
  const details = await fc.check(fc.asyncProperty(arbitrary, predicate), { seed: SEED, numRuns });
  const ms = Math.round(performance.now() - started);
  t.diagnostic(`${name}: ${details.numRuns} runs, seed ${SEED}, ${ms} ms`);
  if (!details.failed) return;
  const error = details.errorInstance;
  const counterexample = details.counterexample?.[0];
  assert.fail(
    [
      `${name} failed after ${details.numRuns} run(s) (shrunk ${details.numShrinks} time(s)).`,
      `Seed: FUZZ_SEED=${SEED} (fast-check seed ${details.seed}, path "${details.counterexamplePath}")`,
      `Reproduce: FUZZ_SEED=${SEED} FUZZ_RUNS=${INJECT_RUNS} node --import tsx --test test/http/fuzz.test.ts`,
      'Counterexample (request):',
      counterexample === undefined ? '(none)' : render(counterexample),
      'Counterexample (value):',
      counterexample === undefined ? '(none)' : fc.stringify(counterexample).slice(0, 2_000),
      'Error:',
      error instanceof Error ? error.message : String(error),
    ].join('\n'),
  );
}

// ------------------------------------------------------------------ answer properties

type HeaderGetter = (name: string) => string | undefined;

/**
 * The properties every answer must have, whichever way it was produced. `text` is the
 * body as received; for HEAD an empty body is expected (HTTP forbids one).
 */
function checkAnswer(method: string, status: number, header: HeaderGetter, text: string): void {
  const what = `${method} -> ${status} ${JSON.stringify(text.slice(0, 300))}`;
  assert.ok(Number.isInteger(status) && status >= 100 && status <= 599, `status: ${what}`);
  // The one 5xx a request can earn: a version other than HTTP/1.0 or 1.1 (505, 50501).
  const versionRefused = status === 505 && text.startsWith('{"error":50501,');
  assert.ok(status < 500 || versionRefused, `a 5xx answer: ${what}`);
  if (status === 405) {
    const allow = header('allow');
    assert.ok(allow !== undefined && allow.length > 0, `405 without Allow: ${what}`);
    const allowed = allow.split(',').map((m) => m.trim());
    assert.ok(!allowed.includes(method.toUpperCase()), `405 but Allow has ${method}: ${allow}`);
  }
  if (status < 400) return;
  if (method.toUpperCase() === 'HEAD' && text === '') return;
  assert.match(header('content-type') ?? '', /^application\/json\b/, `content-type: ${what}`);
  let parsed: unknown;
  try {
    parsed = body({ body: text }); // lossless: integers are bigints, duplicate keys refused
  } catch (error) {
    assert.fail(`the error body is not well-formed JSON (${String(error)}): ${what}`);
  }
  assert.ok(
    typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed),
    `not an object: ${what}`,
  );
  const record = parsed as Record<string, unknown>;
  assert.deepEqual(Object.keys(record).sort(), ['error', 'message'], `keys: ${what}`);
  const { error, message } = record;
  assert.ok(typeof error === 'bigint', `error is not an integer literal: ${what}`);
  assert.ok(error >= INT32_MIN && error <= INT32_MAX, `error is not an int32: ${what}`);
  assert.equal(Math.trunc(Number(error) / 100), status, `error code vs status: ${what}`);
  assert.ok(typeof message === 'string' && message.length > 0, `message: ${what}`);
}

// ------------------------------------------------------------------ what the traffic did

/** The plant operations, each of which the traffic must both succeed and be refused on. */
const OPERATIONS = [
  'GET /plants',
  'POST /plants',
  'GET /plants/{id}',
  'PATCH /plants/{id}',
  'DELETE /plants/{id}',
] as const;

/**
 * Answers per plant operation, 2xx and 4xx apart: a generator that stopped producing
 * valid requests (or invalid ones) would still pass "no 5xx", and test little.
 */
class Tally {
  private readonly counts = new Map<string, { succeeded: number; refused: number }>(
    OPERATIONS.map((operation) => [operation, { succeeded: 0, refused: 0 }]),
  );

  /** Counts an answer to `method` on `target` (path and query), if it is a plant operation. */
  add(method: string, target: string, status: number): void {
    const path = target.split(/[?#]/, 1)[0]!;
    const route =
      path === '/plants' ? '/plants' : /^\/plants\/[^/]+$/.test(path) ? '/plants/{id}' : '';
    const count = this.counts.get(`${method} ${route}`);
    if (count === undefined) return;
    if (status >= 200 && status < 300) count.succeeded += 1;
    else if (status >= 400 && status < 500) count.refused += 1;
  }

  toString(): string {
    return [...this.counts].map(([op, c]) => `${op} ${c.succeeded}/${c.refused}`).join(', ');
  }

  /** Asserts that every operation was both answered with a 2xx and refused with a 4xx. */
  assertBoth(name: string): void {
    for (const [operation, { succeeded, refused }] of this.counts) {
      assert.ok(succeeded > 0, `${name}: no ${operation} succeeded (2xx/4xx: ${this})`);
      assert.ok(refused > 0, `${name}: no ${operation} was refused (2xx/4xx: ${this})`);
    }
  }
}

async function makeTokens(ctx: TestApp): Promise<Tokens> {
  // Issued an hour ago for a minute: expired, without waiting for it to expire.
  const anHourAgo = new TokenService(ctx.store.tokens, {
    now: () => new Date(Date.now() - 3_600_000),
  });
  const expired = (
    await anHourAgo.create({
      name: 'expired',
      scopes: ['plants:read', 'plants:write'],
      expiresInMs: 60_000,
    })
  ).token;
  return {
    TOKEN: ctx.token,
    READ_TOKEN: await ctx.newToken(['plants:read']),
    WRITE_TOKEN: await ctx.newToken(['plants:write']),
    EXPIRED_TOKEN: expired,
  };
}

/** Puts the seed plants back (a run may have deleted them); cheap when they are there. */
async function restoreSeedPlants(ctx: TestApp): Promise<void> {
  for (const id of SEED_IDS) {
    if ((await ctx.store.plants.get(id)) === undefined) {
      await ctx.store.plants.insert({ id, name: `seed ${id}`, tag: 'seed' });
    }
  }
}

// A path the OpenAPI checker in `call()` reads the same way the router does: no percent
// escapes, no dot segments, nothing the URL parser would rewrite before routing.
const PLAIN_PATH = /^\/[A-Za-z0-9_\-./]*$/;
const DOT_SEGMENT = /(^|\/)\.\.?(\/|$)/;

function checkable(req: FuzzRequest): boolean {
  const path = req.url.split('?', 1)[0]!;
  return (
    req.method.toUpperCase() !== 'HEAD' &&
    !req.url.includes('#') &&
    PLAIN_PATH.test(path) &&
    !DOT_SEGMENT.test(path) &&
    !path.startsWith('//')
  );
}

async function healthy(ctx: TestApp): Promise<void> {
  const res = await ctx.app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(res.statusCode, 200, `GET /healthz afterwards: ${res.statusCode} ${res.body}`);
  assert.equal(res.body, '{"status":"ok"}\n');
}

test('inject fuzzer: no 5xx, every 4xx an Error body, /healthz stays 200', async (t) => {
  const ctx = await setup(t);
  const tokens = await makeTokens(ctx);
  const tally = new Tally();
  let viaCall = 0;
  await fuzz(
    t,
    'inject fuzzer',
    injectRequest,
    INJECT_RUNS,
    async (req) => {
      await restoreSeedPlants(ctx);
      const headers = Object.fromEntries(
        req.headers.map(([name, value]) => [name, withTokens(value, tokens)]),
      );
      const options = { method: req.method, url: req.url, headers, payload: req.payload };
      let res;
      if (checkable(req)) {
        viaCall += 1;
        // Also validated against the served OpenAPI document (status, schema, headers).
        res = await ctx.call({ ...options, token: null });
      } else {
        res = await ctx.app.inject(options as InjectOptions);
      }
      const header: HeaderGetter = (name) => {
        const value = res.headers[name];
        return value === undefined ? undefined : String(value);
      };
      checkAnswer(req.method, res.statusCode, header, res.body);
      tally.add(req.method.toUpperCase(), req.url, res.statusCode);
      await healthy(ctx);
    },
    renderRequest,
  );
  t.diagnostic(`inject fuzzer: ${viaCall} request(s) also checked against the OpenAPI document`);
  t.diagnostic(`inject fuzzer, 2xx/4xx per operation: ${tally}`);
  tally.assertBoth('inject fuzzer');
});

// ------------------------------------------------------------------ raw requests

test('raw HTTP fuzzer: no 5xx, every 4xx an Error body, the server stays up', async (t) => {
  const ctx = await setup(t);
  const tokens = await makeTokens(ctx);
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = ctx.app.server.address() as AddressInfo;
  const tally = new Tally();
  let answered = 0;
  await fuzz(
    t,
    'raw HTTP fuzzer',
    rawRequest,
    RAW_RUNS,
    async (req) => {
      await restoreSeedPlants(ctx);
      const bytes = rawBytes(req, tokens);
      const method = req.line.split(/[ \t]/, 1)[0]!;
      const answers = parseAnswers(await exchange(port, bytes, true), method);
      // At least the fuzzed request's answer, or the sentinel's when the bytes held no
      // request (only empty lines) or a complete one that the server closed after.
      assert.ok(answers.length > 0, 'no answer');
      answered += answers.length;
      // The first answer is to the fuzzed request, unless its bytes held none.
      const [, target = ''] = req.line.split(/[ \t]+/);
      tally.add(method, target, answers[0]!.status);
      for (const answer of answers) {
        // Only the first answer can be to a HEAD (see parseAnswers); the bytes after the
        // fuzzed request (its surplus body, the sentinel) never start with HEAD.
        const asked = answer === answers[0] ? method : 'GET';
        checkAnswer(asked, answer.status, (name) => answer.headers.get(name), answer.body);
      }
      assert.ok(ctx.app.server.listening, 'the server stopped listening');
      const [health] = parseAnswers(await exchange(port, HEALTH_REQUEST, false), 'GET');
      assert.equal(health?.status, 200, 'GET /healthz afterwards');
      assert.equal(health.body, '{"status":"ok"}\n');
    },
    renderRaw,
  );
  t.diagnostic(`raw HTTP fuzzer: ${answered} answer(s) checked`);
  t.diagnostic(`raw HTTP fuzzer, 2xx/4xx per operation: ${tally}`);
  tally.assertBoth('raw HTTP fuzzer');
});
