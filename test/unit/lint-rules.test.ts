import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ESLint, type Linter } from 'eslint';

// The rules of eslint.config.js that hold what the layer check cannot see, because it is not
// an import: files under 300 lines, only src/cli ends the process or traps signals, no HTTP
// header name in src/service. Each is run on a few lines placed where it applies and where it
// does not, with the project's own config (less its type-aware entries, which need the file on
// disk in a tsconfig).

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

async function linter(): Promise<ESLint> {
  const config = (await import(pathToFileURL(join(ROOT, 'eslint.config.js')).href)) as {
    default: Linter.Config[];
  };
  const untyped = config.default.filter(
    (entry) =>
      (entry.languageOptions?.parserOptions as { project?: unknown } | undefined)?.project ===
      undefined,
  );
  return new ESLint({ cwd: ROOT, overrideConfigFile: true, overrideConfig: untyped });
}

/** The rules that fire on `code` as the file `path`. */
async function fired(eslint: ESLint, code: string, path: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, path) });
  return [...new Set(result!.messages.map((m) => m.ruleId ?? m.message))].sort();
}

const EXIT = 'export function stop(): void {\n  process.exit(1);\n}\n';
const TRAP = "export function trap(): void {\n  process.once('SIGTERM', () => undefined);\n}\n";
const HEADER = "export const header = 'Retry-After';\n";
const long = (lines: number) =>
  Array.from({ length: lines }, (_, i) => `export const x${i} = ${i};`).join('\n') + '\n';

test('the rules beyond the layers fire where they apply, and only there', async () => {
  const eslint = await linter();
  const cases: [string, string, string[]][] = [
    [EXIT, 'src/server/fixture.ts', ['no-restricted-properties']],
    [EXIT, 'src/cli/fixture.ts', []],
    [TRAP, 'src/server/fixture.ts', ['no-restricted-syntax']],
    [TRAP, 'src/service/fixture.ts', ['no-restricted-syntax']],
    [TRAP, 'src/cli/fixture.ts', []],
    [HEADER, 'src/service/fixture.ts', ['no-restricted-syntax']],
    [HEADER, 'src/http/fixture.ts', []],
    [long(299), 'src/core/fixture.ts', []],
    [long(300), 'src/core/fixture.ts', ['max-lines']],
    [long(300), 'packages/client/src/fixture.ts', ['max-lines']],
    [long(300), 'test/unit/fixture.ts', []],
  ];
  for (const [code, path, rules] of cases) {
    assert.deepEqual(await fired(eslint, code, path), rules, `${path}: ${code.slice(0, 40)}`);
  }
});
