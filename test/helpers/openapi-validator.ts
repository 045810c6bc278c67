import assert from 'node:assert/strict';
import type { ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { addInt64Keyword, forBigIntValidation } from '../../src/api/int64-schema.js';
import { parseJson } from '../../src/api/json.js';

const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

type Json = Record<string, unknown>;

export interface CheckedResponse {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

// Written here rather than imported from src, so a routing bug there cannot hide itself.
const templateRegExp = (template: string) =>
  new RegExp(`^${template.replace(/\{[^}/]+\}/g, '[^/]+')}$`);

const pointer = (...parts: string[]) =>
  `doc#/${parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')}`;

/**
 * Checks responses against a served OpenAPI 3.1 document with Ajv (JSON Schema
 * 2020-12): the status is documented for the operation, the body matches its schema
 * (int64 values checked exactly, parsed losslessly), required headers are present.
 */
export class OpenApiValidator {
  private readonly ajv = new Ajv2020({ strict: false, allowUnionTypes: true });
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly paths: [RegExp, string][];

  constructor(private readonly doc: Json) {
    addFormats(this.ajv);
    addInt64Keyword(this.ajv);
    this.ajv.addSchema(forBigIntValidation(doc), 'doc');
    this.paths = Object.keys(doc.paths as Json).map((path) => [templateRegExp(path), path]);
  }

  private schema(ref: string): ValidateFunction {
    let validate = this.compiled.get(ref);
    if (validate === undefined) {
      validate = this.ajv.compile({ $ref: ref });
      this.compiled.set(ref, validate);
    }
    return validate;
  }

  private validateBody(ref: string, body: unknown, what: string): void {
    const validate = this.schema(ref);
    assert.ok(validate(body), `${what}: ${this.ajv.errorsText(validate.errors)}`);
  }

  check(method: string, url: string, res: CheckedResponse): void {
    const what = `${method} ${url} -> ${res.statusCode}`;
    const path = url.split('?', 1)[0]!;
    const template = this.paths.find(([matcher]) => matcher.test(path))?.[1];
    const operation =
      template && ((this.doc.paths as Json)[template] as Json)[method.toLowerCase()];
    if (operation === undefined || template === undefined) {
      // Not an operation (unknown path or method): the answer must be an Error.
      assert.ok(res.statusCode >= 400 && res.statusCode < 500, `${what}: expected a 4xx`);
      this.checkError(pointer('components', 'schemas', 'Error'), res, what);
      return;
    }
    const status = String(res.statusCode);
    const spec = ((operation as Json).responses as Json)[status] as Json | undefined;
    assert.ok(spec !== undefined, `${what}: status not documented for ${method} ${template}`);
    for (const [name, header] of Object.entries((spec.headers ?? {}) as Json)) {
      const resolved = this.resolve(header as Json);
      if (resolved.required === true) {
        assert.ok(res.headers[name.toLowerCase()] !== undefined, `${what}: missing header ${name}`);
      }
    }
    const content = spec.content as Json | undefined;
    if (content === undefined) {
      assert.equal(res.body, '', `${what}: body must be empty`);
      return;
    }
    const mediaType = String(res.headers['content-type'] ?? '')
      .split(';', 1)[0]!
      .trim();
    assert.ok(mediaType in content, `${what}: content-type ${mediaType} not documented`);
    if (mediaType !== 'application/json') return;
    const ref = pointer(
      'paths',
      template,
      method.toLowerCase(),
      'responses',
      status,
      'content',
      mediaType,
      'schema',
    );
    if (res.statusCode >= 400) this.checkError(ref, res, what);
    else this.validateBody(ref, parseJson(res.body), what);
  }

  private checkError(ref: string, res: CheckedResponse, what: string): void {
    assert.match(
      String(res.headers['content-type']),
      /^application\/json/,
      `${what}: error content-type`,
    );
    const body = parseJson(res.body) as { error: bigint };
    this.validateBody(ref, JSON.parse(res.body), what);
    assert.equal(
      Math.trunc(Number(body.error) / 100),
      res.statusCode,
      `${what}: error code vs status`,
    );
  }

  private resolve(node: Json): Json {
    const ref = node.$ref;
    if (typeof ref !== 'string') return node;
    return ref
      .slice(2)
      .split('/')
      .reduce<Json>(
        (at, key) => at[key.replaceAll('~1', '/').replaceAll('~0', '~')] as Json,
        this.doc,
      );
  }
}
