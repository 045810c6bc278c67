// plantstore's SQLite webhook module, but for an outbox that adds no message: a module's
// own export wins over the same name from `export *`.
export * from '../../dist/store/sqlite/webhooks.js';

export function sqliteOutbox() {
  return () => 0;
}
