import { templateMatcher } from './operation.js';
import { operations } from './operations.js';

const byTemplate = new Map<string, string[]>();
for (const op of operations)
  byTemplate.set(op.path, [...(byTemplate.get(op.path) ?? []), op.method]);
const matchers = [...byTemplate].map(([template, methods]) => ({
  matcher: templateMatcher(template),
  methods,
}));

/** Methods the API supports on a concrete path, or undefined when no route has it. */
export function allowedMethods(path: string): string[] | undefined {
  return matchers.find(({ matcher }) => matcher.test(path))?.methods;
}
