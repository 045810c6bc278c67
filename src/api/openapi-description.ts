import { errorCatalogue, statusOf } from '../core/errors.js';
import { INT64_MAX, INT64_MIN } from '../core/int64.js';
import { DEFAULT_RATE_LIMITS } from '../core/rate-limit.js';
import { UNSEEN_TOKEN_LOOKUPS_MAX, UNSEEN_TOKEN_LOOKUPS_WAITING } from '../core/tokens.js';
import { JSON_LIMITS } from './json.js';
import {
  BODY_LIMIT,
  HEADER_SECTION_LIMIT,
  HEADERS_TIMEOUT_MS,
  IN_FLIGHT_PER_CONNECTION,
  IN_FLIGHT_PER_TOKEN,
  KEEP_ALIVE_TIMEOUT_MS,
  MAX_CONNECTIONS,
  PIPELINED_PER_CONNECTION,
  REQUEST_TIMEOUT_MS,
  SEND_TIMEOUT_MS,
  SHUTDOWN_GRACE_MS,
} from './limits.js';
import { corsDescription } from './openapi-preflight.js';

// The prose at the top of the OpenAPI document (info.description). A reference page shows it
// above the operations, so only what a caller needs first is open; the rules in full (limits,
// headers, CORS, rate limits, the error catalogue) follow in a closed <details> section. Every
// limit is read from the constant the server enforces, so the two cannot disagree.

const { perToken, authFailures } = DEFAULT_RATE_LIMITS as {
  perToken: NonNullable<(typeof DEFAULT_RATE_LIMITS)['perToken']>;
  authFailures: NonNullable<(typeof DEFAULT_RATE_LIMITS)['authFailures']>;
};

const catalogueTable = Object.entries(errorCatalogue)
  .map(([name, kind]) => `| ${kind.code} | ${statusOf(kind)} | ${name} | ${kind.message} |`)
  .join('\n');

const seconds = (ms: number) => `${ms / 1000} s`;

export const description = `A plant store. Every plant is identified by a signed 64-bit integer id
(${INT64_MIN} to ${INT64_MAX}), exact everywhere: in paths and query strings as a canonical
decimal (no sign on positives, no leading zeros), in JSON as an integer (never a string).
Every operation under /plants needs \`Authorization: Bearer <ACCESS_TOKEN>\` (\`plantstore
token create\`); every error is \`{"error": <int32>, "message": <string>}\`.

<details>
<summary>The rules in full: order of checks, limits, headers, CORS, rate limits, error catalogue</summary>

## Order of checks

Reads need the scope \`plants:read\`, writes \`plants:write\`. Checks run in this order: routing (unknown
path \`404\`, unsupported method \`405\` with \`Allow\`), the client address's
failed-authentication limit (\`429\`), authentication (\`401\`), the token's rate limit
(\`429\`), scope (\`403\`), then input (\`400\`, \`413\`, \`415\`).

Every error, whatever its status, is \`application/json\` \`{"error": <int32>, "message": <string>}\`
and carries \`X-Request-Id\`. Besides the answers listed per operation, any request can get
\`404\` (no such path) or \`405\` (method not supported on the path, with \`Allow\`), both with
the Error body. \`HEAD\` is not served (\`405\`), nor \`OPTIONS\` except as a CORS preflight.
When the database is locked or unreachable, operations answer \`503\` with \`Retry-After\`.

## Limits

- Size: request bodies ${BODY_LIMIT / 1024} KiB (\`413\`), the header section ${HEADER_SECTION_LIMIT / 1024} KiB (\`431\`);
  a JSON body may nest ${JSON_LIMITS.depth} levels deep and hold arrays of ${JSON_LIMITS.arrayItems}
  items at most (\`400\`, 40009), checked before it is parsed.
- Time: the header section must arrive within ${seconds(HEADERS_TIMEOUT_MS)} and the whole
  request, headers and body, within ${seconds(REQUEST_TIMEOUT_MS)} (\`408\`, then the
  connection is closed); an idle keep-alive connection is closed after
  ${seconds(KEEP_ALIVE_TIMEOUT_MS)}. These are the defaults; a server may be started with
  others (\`--headers-timeout\`, \`--request-timeout\`, \`--keep-alive-timeout\`).
- Sending: an answer of which the client takes nothing for ${seconds(SEND_TIMEOUT_MS)}
  closes its connection (\`--send-timeout\`).
- Connections: a process keeps at most ${MAX_CONNECTIONS} open by default
  (\`--max-connections\`); past it a new connection takes the place of the one idle longest,
  else of the one whose client has taken nothing of its answer for 5 s, of its own client
  address or of an address holding more connections (a stalled one: only of an address
  holding more), and is otherwise closed at once, without an answer. A connection
  has at most ${IN_FLIGHT_PER_CONNECTION} requests answered at once, one at a time while its answers
  wait unsent, and nothing more is read from it meanwhile; a client that pipelines more than
  ${PIPELINED_PER_CONNECTION} requests ahead of its answers is disconnected, and so are clients
  that read nothing once the unsent answers of all connections take too much memory.
- Versions: HTTP/1.1 and HTTP/1.0; any other version on the request line is \`505\`.
- Shutdown: requests still running ${seconds(SHUTDOWN_GRACE_MS)} after the server was told
  to stop are cut off (\`--shutdown-grace\`).

## Headers on every answer

\`X-Request-Id\`; \`X-Content-Type-Options: nosniff\`, so a browser never treats an answer
as another type than the one sent; \`Cache-Control: no-store\`, as answers hold one token
holder's view of the data (only the assets of /docs may be cached). No \`X-Powered-By\`.

## CORS

${corsDescription}

## Rate limits

Two limits apply to the operations that take a token, in fixed windows aligned to the clock
(by default; the operator may change or turn off either, and \`RateLimit-Policy\` says what
applies):

- **per token**: ${perToken.quota} requests per ${perToken.windowSeconds} s window, every request with a valid token counting,
  whatever its answer. Beyond that, \`429\` with error 42901 until the window ends.
- **per client address, failed authentications**: ${authFailures.quota} \`401\` answers per ${authFailures.windowSeconds} s window. Beyond
  that, requests from the address are \`429\` with error 42902 until the window ends, before
  their token is looked up, except those whose token this server has already verified.
  Credentials still being checked count as failures until they turn out valid: guesses sent
  at once are held to the limit like guesses sent one after another.

Every \`429\` carries \`Retry-After\` (seconds until the window ends; 1 for 42903). Answers report the
limit that applied to them in \`RateLimit\` and \`RateLimit-Policy\`
(draft-ietf-httpapi-ratelimit-headers-11): the token's on answers after the token is verified (not on 42903),
the address's on \`401\`s and on 42902.

Requests at once are bounded too. A server process serves at most ${IN_FLIGHT_PER_TOKEN} requests of one token at
a time (by default): beyond that, \`429\` with error 42903 and \`Retry-After: 1\`, before the
rate limit counts the request; an open event stream or a waiting long poll holds no such
place. And it looks up at most ${UNSEEN_TOKEN_LOOKUPS_MAX} tokens it has not verified at once, ${UNSEEN_TOKEN_LOOKUPS_WAITING} more waiting their
turn: a request with such a token beyond that is \`503\` with error 50303 and \`Retry-After: 1\`.

## Error catalogue

\`Math.trunc(error / 100)\` is the HTTP status.

| error | status | name | meaning |
|---|---|---|---|
${catalogueTable}

</details>
`;
