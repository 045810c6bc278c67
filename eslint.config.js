// @ts-check
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const PROCESS_EXIT = {
  object: 'process',
  property: 'exit',
  message: 'Only src/cli ends the process; take a ProcessControl (src/server/process-control.ts).',
};
const SIGNAL_TRAP = {
  selector:
    "CallExpression[callee.object.name='process'][callee.property.name=/^(on|once|addListener|prependListener|prependOnceListener)$/][arguments.0.value=/^SIG/]",
  message: 'Only src/cli traps signals; take a ProcessControl (src/server/process-control.ts).',
};
const HEADER_NAME = {
  selector:
    'Literal[value=/^(retry-after|idempotent-replayed|www-authenticate|etag|location|ratelimit[-a-z]*|x-request-id|content-type)$/i]',
  message: 'An HTTP header name in src/service: headers are the app’s (src/http).',
};

export default tseslint.config(
  {
    ignores: ['dist/', 'dist.*/', 'packages/*/dist/', 'node_modules/', 'coverage/', '.tmp/'],
  },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  {
    // Rules that need type information, on the service's code only: a promise nobody awaits
    // loses its rejection, and one passed where a callback's result is ignored does too.
    // tsconfig.build.json holds src/ alone, which keeps the type-checked lint fast; the
    // client package (packages/client) is read with its own.
    files: ['src/**/*.ts', 'packages/*/src/**/*.ts'],
    languageOptions: {
      parserOptions: {
        project: ['./tsconfig.build.json', './packages/*/tsconfig.json'],
        tsconfigRootDir: dirname(fileURLToPath(import.meta.url)),
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  // What the layer check (.dependency-cruiser.mjs) cannot see, because it is not an import.
  {
    // A file of 300 lines or more holds more than one thing; the generated schema is exempt.
    files: ['src/**/*.ts', 'packages/*/src/**/*.ts'],
    ignores: ['**/*.d.ts'],
    rules: { 'max-lines': ['error', { max: 299, skipBlankLines: false, skipComments: false }] },
  },
  {
    // The CLI owns the process: the runtime exits and stops through what the CLI hands it
    // (src/server/process-control.ts), so a test or another host can start and stop it.
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**'],
    rules: {
      'no-restricted-properties': ['error', PROCESS_EXIT],
      'no-restricted-syntax': ['error', SIGNAL_TRAP],
    },
  },
  {
    // The services know no HTTP: a header name in them is HTTP leaking in (the app maps
    // their outcomes to headers). no-restricted-syntax is set whole here, signals included.
    files: ['src/service/**/*.ts'],
    rules: { 'no-restricted-syntax': ['error', SIGNAL_TRAP, HEADER_NAME] },
  },
  {
    files: ['bin/**'],
    languageOptions: { globals: { process: 'readonly' } },
  },
);
