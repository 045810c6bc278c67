// No imports: the CLI parses --cors-origins without loading the HTTP stack.

/**
 * Origins whose web pages may call the API (CORS): a list of origins, or `*` for any. The
 * API authenticates with bearer tokens a page must hold itself, never with cookies, so
 * `*` exposes nothing a page could not already do with a token it was given; credentials
 * mode (`Access-Control-Allow-Credentials`) is never answered.
 */
export type CorsOrigins = '*' | readonly string[];

/**
 * Parses `--cors-origins`: comma-separated origins exactly as browsers send them
 * (`https://app.example`, `http://127.0.0.1:3000`), or `*` alone. Empty: CORS off.
 * Throws with a message a user can act on.
 */
export function parseCorsOrigins(text: string): CorsOrigins {
  const items = [...new Set(text.split(',').map((item) => item.trim()))].filter(Boolean);
  if (items.includes('*')) {
    if (items.length > 1) throw new Error('"*" allows every origin; give it alone, not in a list');
    return '*';
  }
  for (const item of items) {
    let origin: string | undefined;
    try {
      const url = new URL(item);
      if (url.protocol === 'http:' || url.protocol === 'https:') origin = url.origin;
    } catch {
      // Reported below.
    }
    if (origin !== item) {
      const hint = origin === undefined ? 'scheme://host[:port]' : origin;
      throw new Error(`"${item}" is not an origin as a browser sends it; write it as ${hint}`);
    }
  }
  return items;
}
