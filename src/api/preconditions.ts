import { ApiError } from '../core/errors.js';
import type { IfMatch } from '../core/etag.js';

// One entity tag of a list (RFC 9110 §8.8.3), with the comma or end that follows it.
const LIST_ITEM = /[ \t]*((?:W\/)?"[\x21\x23-\x7e\x80-\xff]*")[ \t]*(?:,|$)/y;
// An empty element of the list, which a recipient must accept (RFC 9110 §5.6.1.2), or its
// white-space end.
const NO_ITEM = /[ \t]*(?:,|$)/y;

/** The `If-Match` header as a condition; undefined when absent. */
export const parseIfMatch = (header: string | string[] | undefined): IfMatch | undefined =>
  parseTags(header, 'If-Match');

/** The `If-None-Match` header of a read as a condition; undefined when absent. */
export const parseIfNoneMatch = (header: string | string[] | undefined): IfMatch | undefined =>
  parseTags(header, 'If-None-Match');

function parseTags(
  header: string | string[] | undefined,
  name: 'If-Match' | 'If-None-Match',
): IfMatch | undefined {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(', ') : header;
  if (text.trim() === '*') return { any: true };
  const malformed = () =>
    new ApiError(
      'malformedPrecondition',
      `${name} must be "*" or a comma-separated list of entity tags such as "abc".`,
    );
  const tags: string[] = [];
  LIST_ITEM.lastIndex = 0;
  while (LIST_ITEM.lastIndex < text.length) {
    NO_ITEM.lastIndex = LIST_ITEM.lastIndex;
    if (NO_ITEM.test(text) && NO_ITEM.lastIndex > LIST_ITEM.lastIndex) {
      LIST_ITEM.lastIndex = NO_ITEM.lastIndex;
      continue;
    }
    const start = LIST_ITEM.lastIndex;
    const match = LIST_ITEM.exec(text);
    if (match === null || LIST_ITEM.lastIndex === start) throw malformed();
    tags.push(match[1]!);
  }
  if (tags.length === 0) throw malformed();
  return { any: false, tags };
}
