/**
 * A Retry-After value (RFC 9110 §10.2.3) in milliseconds from `now`: delay-seconds or an
 * HTTP-date. Null when absent or unreadable, so that the schedule alone decides.
 */
export function parseRetryAfter(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  // An IMF-fixdate has a weekday, a comma and GMT; Date.parse alone takes too much.
  if (!/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(text)) return null;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}
