/**
 * Limits of the HTTP edge; each is published in docs/api.md and the OpenAPI document. The
 * timeouts are defaults, configurable on `serve` (see src/cli/options.ts).
 */

/** Bytes a request body may have (413 beyond). */
export const BODY_LIMIT = 64 * 1024;

/** Bytes the header section of a request may have (431 beyond): Node's default, set explicitly. */
export const HEADER_SECTION_LIMIT = 16 * 1024;

/** A whole request (headers and body) must arrive within this (408 beyond). */
export const REQUEST_TIMEOUT_MS = 30_000;

/** The header section must arrive within this (408 beyond); at most the request timeout. */
export const HEADERS_TIMEOUT_MS = 10_000;

/**
 * An idle keep-alive connection is closed after this. Fastify's default, kept: longer
 * than the 60 s idle timeout of common load balancers, so a balancer does not send a
 * request on a connection the server is closing at that moment.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** On shutdown, requests still running after this are cut off. */
export const SHUTDOWN_GRACE_MS = 10_000;

/**
 * Bounds of the configurable timeouts. Node checks the request and header timeouts once a
 * second, so shorter ones would not hold; zero (Node's "never") is refused on purpose.
 */
export const TIMEOUT_MIN_MS = 1_000;
export const TIMEOUT_MAX_MS = 3_600_000;

/**
 * Open connections a process accepts at most; Node closes any beyond at once. Keeps a
 * flood of idle or slow connections from exhausting file descriptors and memory.
 */
export const MAX_CONNECTIONS = 4_096;

/**
 * Requests of one connection answered at once; while this many are unanswered the server
 * reads nothing more from the connection, so a client that pipelines without reading its
 * answers holds a bounded amount of memory.
 */
export const IN_FLIGHT_PER_CONNECTION = 8;

/**
 * Requests of one token a process serves at once (429 beyond, with Retry-After: 1). The
 * rate limit counts requests a minute; this bounds how many one client has queued for the
 * database at a time, so that it cannot hold every pooled connection and make the other
 * clients wait. Open event streams and waiting long polls hold no place (see events.ts).
 * GitHub's API allows 100 concurrent requests; 64 is as many as the benchmark's whole load.
 */
export const IN_FLIGHT_PER_TOKEN = 64;

/**
 * Requests a client may send ahead of its answers on one connection (those being answered
 * included). Node parses what one read brings in (up to 64 KiB, hundreds of small requests)
 * before it can stop; a client with more than this outstanding is disconnected.
 */
export const PIPELINED_PER_CONNECTION = 64;

/**
 * An answer of which the client takes nothing for this long (it does not read, and the
 * kernel's buffers are full) closes its connection, as a slow sender gets a 408.
 */
export const SEND_TIMEOUT_MS = 30_000;

/**
 * Once a shutdown begins, the send timeout is this (or the configured one, if shorter): a
 * client that stopped reading an answer, an event stream most often, would otherwise hold the
 * shutdown for its whole grace. One still taking bytes reads to the end, as long as the
 * server's buffers for it move within that time (the kernel's own cannot be seen).
 */
export const SHUTDOWN_SEND_TIMEOUT_MS = 1_000;
