/** Scopes a token can carry; each operation names the one it needs. */
export const SCOPES = [
  'plants:read',
  'plants:write',
  'webhooks:read',
  'webhooks:write',
  'events:read',
] as const;
export type Scope = (typeof SCOPES)[number];

// Webhook scopes are asked for explicitly: a token made for plants does not manage
// where the store sends its changes. So is the changes feed's, events:read.
export const DEFAULT_SCOPES: readonly Scope[] = ['plants:read', 'plants:write'];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/**
 * Parses a comma-separated scope list such as `plants:read,plants:write`.
 * Throws with a message naming the offending entry.
 */
export function parseScopes(text: string): Scope[] {
  const parts = text.split(',').map((part) => part.trim());
  if (parts.length === 0 || parts.some((part) => part === '')) {
    throw new Error(`scopes must be a comma-separated list of: ${SCOPES.join(', ')}`);
  }
  const unknown = parts.find((part) => !isScope(part));
  if (unknown !== undefined) {
    throw new Error(`unknown scope "${unknown}"; known scopes: ${SCOPES.join(', ')}`);
  }
  return [...new Set(parts as Scope[])];
}
