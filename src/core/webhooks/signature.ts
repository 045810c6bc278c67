import { createHmac, randomBytes } from 'node:crypto';

/**
 * Signing per Standard Webhooks (standard-webhooks spec, "Signature scheme"): the
 * signature is `v1,` + base64 of HMAC-SHA256 over `{id}.{timestamp}.{body}`, keyed with
 * the bytes the secret's base64 encodes after its `whsec_` prefix.
 */

const PREFIX = 'whsec_';
const SECRET_BYTES = 32;

/** A new signing secret: `whsec_` + base64 of 32 random bytes. */
export function newSecret(random: (size: number) => Buffer = randomBytes): string {
  return PREFIX + random(SECRET_BYTES).toString('base64');
}

/** The HMAC key of a secret: the bytes after `whsec_`. Throws on anything else. */
export function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : '';
  const key = Buffer.from(encoded, 'base64');
  // A key that does not round-trip was not base64; signing with it would sign with garbage.
  if (key.length === 0 || key.toString('base64') !== encoded) {
    throw new Error('a webhook secret is whsec_ followed by base64');
  }
  return key;
}

/** The content signed: `{id}.{timestamp}.{body}` with the timestamp in Unix seconds. */
export function signedContent(messageId: string, timestamp: number, body: string): string {
  return `${messageId}.${timestamp}.${body}`;
}

/**
 * The value of the signature header: one `v1,<base64>` per secret, space-separated. During
 * a rotation there are two secrets (current first), so a receiver holding either verifies.
 */
export function signatureHeader(
  secrets: readonly string[],
  messageId: string,
  timestamp: number,
  body: string,
): string {
  const content = signedContent(messageId, timestamp, body);
  return secrets
    .map(
      (secret) => 'v1,' + createHmac('sha256', secretKey(secret)).update(content).digest('base64'),
    )
    .join(' ');
}
