/* global URL */
// Module resolution hooks (node:module register): every import of plantstore's SQLite
// webhook module gets the shim beside this file instead, except the shim's own import.
const TARGET = '/dist/store/sqlite/webhooks.js';
const SHIM = new URL('./sqlite-webhooks.mjs', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (resolved.url.endsWith(TARGET) && context.parentURL !== SHIM) {
    return { ...resolved, url: SHIM, shortCircuit: true };
  }
  return resolved;
}
