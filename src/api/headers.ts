import type { IncomingHttpHeaders } from 'node:http';

/**
 * How many times the header `name` (lower case) came in the request's header section.
 * Node folds repeated lines into one value (joined with ", ", or only the first kept for
 * fields such as Host), so only the raw lines tell that a header came twice.
 */
export function headerLines(rawHeaders: readonly string[], name: string): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const line = rawHeaders[i]!;
    if (line.length === name.length && line.toLowerCase() === name) count++;
  }
  return count;
}

/** Whether a request says it has a body (one not known to be empty). */
export function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
