import { EventEmitter, once } from 'node:events';
import http, { type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';

// A webhook receiver on loopback for the end-to-end suites: it keeps every request it
// gets and answers as the test says, one answer per request in turn.

export interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
  path: string;
}

/** How to answer one request: a status (and headers), or `hang` to never answer. */
export type Answer = number | 'hang' | ((response: ServerResponse) => void);

export interface Receiver {
  url: string;
  port: number;
  received: Delivery[];
  /** Answers for the next requests, in turn; then `fallback` for the rest. */
  answers: Answer[];
  fallback: Answer;
  /** Resolves once `count` requests have arrived. */
  waitFor(count: number): Promise<Delivery[]>;
  close(): Promise<void>;
}

/** Starts a receiver on 127.0.0.1 (on `port` if given); closed after the test. */
export async function startReceiver(t: TestContext, port = 0): Promise<Receiver> {
  const events = new EventEmitter();
  const receiver: Receiver = {
    url: '',
    port: 0,
    received: [],
    answers: [],
    fallback: 200,
    async waitFor(count) {
      while (receiver.received.length < count) await once(events, 'request');
      return receiver.received;
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
  const server = http.createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      receiver.received.push({ headers: request.headers, body, path: request.url ?? '' });
      events.emit('request');
      respond(receiver.answers.shift() ?? receiver.fallback, response);
    });
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    if (server.listening) {
      server.closeAllConnections();
      server.close();
    }
  });
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `http://127.0.0.1:${receiver.port}/hooks/plants`;
  return receiver;
}

function respond(answer: Answer, response: ServerResponse): void {
  if (answer === 'hang') return;
  if (typeof answer === 'function') answer(response);
  else response.writeHead(answer, { 'content-type': 'text/plain' }).end(`answer ${answer}`);
}

/** A port nothing listens on (just now). */
export async function freePort(): Promise<number> {
  const server = http.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}
