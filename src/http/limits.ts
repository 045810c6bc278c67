/** Limits of the HTTP edge; each is published in the README and the OpenAPI document. */

/** Bytes a request body may have (413 beyond). */
export const BODY_LIMIT = 64 * 1024;

/** A whole request (headers and body) must arrive within this (408 beyond). */
export const REQUEST_TIMEOUT_MS = 30_000;

/** The header section must arrive within this (408 beyond). */
export const HEADERS_TIMEOUT_MS = 10_000;

/** On shutdown, requests still running after this are cut off. */
export const SHUTDOWN_GRACE_MS = 10_000;

/**
 * Open connections a process accepts at most; Node closes any beyond at once. Keeps a
 * flood of idle or slow connections from exhausting file descriptors and memory.
 */
export const MAX_CONNECTIONS = 4_096;
