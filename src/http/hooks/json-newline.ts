import type { FastifyInstance } from 'fastify';

// Every JSON body the server sends ends with a newline, as Go's encoder, Kubernetes and
// Docker write theirs: `curl -i` then leaves the shell's prompt on a line of its own instead
// of after the closing brace. JSON allows whitespace after the value, so a parser reads the
// body as before. ETags are made from the plant, not the bytes, and Content-Length is
// counted after this hook, so neither changes with it.

/** `text` ending with a newline. */
export const withFinalNewline = (text: string): string =>
  text.endsWith('\n') ? text : `${text}\n`;

const isJson = (type: unknown) => typeof type === 'string' && type.startsWith('application/json');

/**
 * The one place the bodies Fastify serialized (an operation's answer, an error) get their
 * final newline: an onSend hook, run after serialization, whatever serialized them. Bodies
 * that are no JSON text (the /docs assets, a stream) pass as they are. Three answers end
 * theirs as this does, outside it: those of Fastify's frameworkErrors (app.ts), those written
 * straight to the socket (raw-errors.ts), and the OpenAPI document, one shared Buffer
 * (routes/system.ts).
 */
export function endJsonBodiesWithNewline(app: FastifyInstance): void {
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (typeof payload === 'string' && payload !== '' && isJson(reply.getHeader('content-type'))) {
      done(null, withFinalNewline(payload));
    } else {
      done(null, payload);
    }
  });
}
