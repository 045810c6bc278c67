// The PostgreSQL adapter's bounds, in a module of their own so that code which only needs
// the numbers (the --workers primary) does not load pg.

export const DEFAULT_POOL_SIZE = 10;
/** How long a request waits for a free connection (or a new one) before a 503. */
export const CONNECT_TIMEOUT_MS = 2_000;
/** How long one statement may run, on the server and on the wire, before a 503. */
export const STATEMENT_TIMEOUT_MS = 5_000;
