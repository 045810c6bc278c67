import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { Readable } from 'node:stream';

// The CLI's fetch, on node:http. Node 20's fetch (undici, with web streams for every body)
// cost 1.6 to 1.9 ms of CPU a request on the machine measured, this 0.8 to 0.9 ms, and
// `plants import` runs as fast as the CLI's CPU allows: 1.4 times the lines a second at the
// same concurrency (bench/HISTORY.md). It does what the client asks of fetch and no more: a
// method, headers, a string body and a signal; no redirects (the server sends none), no
// decompression (it compresses nothing). It fails as fetch does, with a TypeError whose cause
// is the system error, so describeFailure and closedBeforeAnswer read both alike.

/** Longest a request waits with nothing from the server, as undici's fetch (300 s). */
const IDLE_TIMEOUT_MS = 300_000;

// Kept-alive connections, as fetch keeps them; one left idle for 4 s is closed, well before
// the server's keep-alive timeout (72 s by default), so that no request is written to a
// connection the server is closing. Idle ones do not keep the process alive.
const agents = {
  'http:': new HttpAgent({ keepAlive: true, timeout: 4000 }),
  'https:': new HttpsAgent({ keepAlive: true, timeout: 4000 }),
};

const NO_BODY = new Set([204, 205, 304]);

const fetchFailed = (cause: unknown) => new TypeError('fetch failed', { cause });

/** `fetch` for the URLs and requests of @plantstore/client, on node:http(s). */
export function httpFetch(
  input: string | URL | Request,
  init: RequestInit = {},
): Promise<Response> {
  if (typeof input !== 'string' && !(input instanceof URL)) {
    return Promise.reject(new TypeError('httpFetch takes a URL, not a Request'));
  }
  const url = new URL(input);
  const { body, signal } = init;
  if (body !== undefined && body !== null && typeof body !== 'string') {
    return Promise.reject(new TypeError('httpFetch sends string bodies only'));
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return Promise.reject(fetchFailed(new Error(`unsupported protocol ${url.protocol}`)));
  }
  if (signal?.aborted) return Promise.reject(signal.reason);
  const headers: Record<string, string> = Object.fromEntries(new Headers(init.headers));
  if (typeof body === 'string') headers['content-length'] = String(Buffer.byteLength(body));
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<Response>((resolve, reject) => {
    const abort = () => request.destroy(signal!.reason as Error);
    const settle = () => signal?.removeEventListener('abort', abort);
    const agent = agents[url.protocol as keyof typeof agents];
    const request = send(url, { method: init.method ?? 'GET', headers, agent }, (response) => {
      const answer = new Headers();
      const raw = response.rawHeaders;
      for (let i = 0; i < raw.length; i += 2) answer.append(raw[i]!, raw[i + 1]!);
      const status = response.statusCode ?? 0;
      const empty = NO_BODY.has(status) || init.method === 'HEAD';
      if (empty) response.resume();
      // The body as a web stream, as fetch gives it (the event stream reads it so): an
      // abort destroys the request, and with it this stream.
      response.once('close', settle);
      resolve(
        new Response(empty ? null : (Readable.toWeb(response) as ReadableStream<Uint8Array>), {
          status,
          statusText: response.statusMessage ?? '',
          headers: answer,
        }),
      );
    });
    signal?.addEventListener('abort', abort, { once: true });
    request.setTimeout(IDLE_TIMEOUT_MS, () =>
      request.destroy(Object.assign(new Error('no answer for 300 s'), { code: 'ETIMEDOUT' })),
    );
    request.on('error', (error) => {
      settle();
      reject(signal?.aborted ? signal.reason : fetchFailed(error));
    });
    request.end(body ?? undefined);
  });
}
