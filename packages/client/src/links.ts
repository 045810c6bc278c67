// One link-value of a Link field (RFC 8288 §3): `<target>` then `;`-separated parameters,
// whose values may be quoted strings holding `,` or `;`.
const LINK =
  /<([^>]*)>((?:\s*;\s*[!#$%&'*+.^_`|~\w-]+(?:\s*=\s*(?:"(?:[^"\\]|\\.)*"|[^;,\s]*))?)*)/g;
const PARAM = /;\s*([!#$%&'*+.^_`|~\w-]+)(?:\s*=\s*("(?:[^"\\]|\\.)*"|[^;,\s]*))?/g;

const unquote = (value: string) =>
  value.startsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value;

/**
 * The target of the `rel="next"` link in a Link field, resolved against the URL of the
 * answer that carried it; undefined when there is none (the last page). The target is
 * taken as text, so an id in it (`after=9007199254740993`) keeps every digit.
 */
export function nextLink(field: string | null, base: URL): URL | undefined {
  if (field === null) return undefined;
  for (const [, target, params] of field.matchAll(LINK)) {
    for (const [, name, value] of params!.matchAll(PARAM)) {
      const rels = unquote(value ?? '')
        .toLowerCase()
        .split(/\s+/);
      if (name!.toLowerCase() === 'rel' && rels.includes('next')) return new URL(target!, base);
    }
  }
  return undefined;
}
