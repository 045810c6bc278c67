import assert from 'node:assert/strict';
import { connect } from 'node:net';

// A raw HTTP/1.x client for the fuzzer: bytes written to a socket, and what the server sends
// back split into its answers.

export const HEALTH_REQUEST = Buffer.from(
  'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
  'latin1',
);

/**
 * Writes the bytes and resolves with everything the server sends back until it closes.
 * With `sentinel`, a `GET /healthz` with `Connection: close` follows the bytes, so the
 * server closes the connection itself once it has answered. Only when it has not closed
 * after `graceMs` (the fuzzed request's framing swallowed the sentinel: a Content-Length
 * or chunked body still incomplete) does the client half-close, making Node's parser
 * finish. Half-closing right away would race with the answer: Node treats the client's
 * FIN as an abort, and an answer still in the making (e.g. after `Expect: 100-continue`
 * and an asynchronous handler) could be dropped, which no real client provokes.
 */
export function exchange(port: number, bytes: Buffer, sentinel: boolean): Promise<Buffer> {
  const graceMs = 500;
  const timeoutMs = 3_000;
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () =>
      socket.write(sentinel ? Buffer.concat([bytes, HEALTH_REQUEST]) : bytes),
    );
    const chunks: Buffer[] = [];
    const grace = setTimeout(() => socket.end(), graceMs);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection was not closed within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // A reset after the answer (the server closing with bytes still unread) is fine.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(grace);
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
  });
}

export interface RawAnswer {
  status: number;
  headers: Map<string, string>;
  body: string;
}

function dechunk(data: Buffer, from: number): { body: Buffer; end: number } {
  const parts: Buffer[] = [];
  let at = from;
  for (;;) {
    const eol = data.indexOf('\r\n', at);
    assert.ok(eol >= 0, 'a truncated chunked body');
    const size = Number.parseInt(data.subarray(at, eol).toString('latin1'), 16);
    assert.ok(Number.isInteger(size) && size >= 0, 'a malformed chunk size');
    at = eol + 2;
    if (size === 0) {
      const end = data.indexOf('\r\n\r\n', at - 2);
      return { body: Buffer.concat(parts), end: end < 0 ? data.length : end + 4 };
    }
    parts.push(data.subarray(at, at + size));
    at += size + 2;
  }
}

/** Splits what the server sent into its final answers (1xx interim answers skipped). */
export function parseAnswers(data: Buffer, firstMethod: string): RawAnswer[] {
  const answers: RawAnswer[] = [];
  let at = 0;
  while (at < data.length) {
    const headEnd = data.indexOf('\r\n\r\n', at);
    assert.ok(
      headEnd >= 0,
      `an incomplete answer: ${JSON.stringify(data.subarray(at, at + 300).toString('latin1'))}`,
    );
    const [statusLine = '', ...lines] = data.subarray(at, headEnd).toString('latin1').split('\r\n');
    const match = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine);
    assert.ok(match, `not an HTTP status line: ${JSON.stringify(statusLine)}`);
    const status = Number(match[1]);
    const headers = new Map<string, string>();
    for (const line of lines) {
      const colon = line.indexOf(':');
      assert.ok(colon > 0, `a malformed answer header: ${JSON.stringify(line)}`);
      headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    at = headEnd + 4;
    if (status < 200) continue;
    const rest = data.subarray(at);
    const length = headers.get('content-length');
    let bodyBytes: Buffer;
    if (
      status === 204 ||
      status === 304 ||
      // The answer to a HEAD request has no body, unless Node's parser refused the request
      // before knowing its method (then the raw error answer has its body).
      (answers.length === 0 &&
        firstMethod === 'HEAD' &&
        (rest.length === 0 || rest.subarray(0, 5).toString('latin1') === 'HTTP/'))
    ) {
      bodyBytes = Buffer.alloc(0);
    } else if (length !== undefined) {
      const n = Number(length);
      assert.ok(Number.isInteger(n) && n >= 0, `a bad answer Content-Length: ${length}`);
      assert.ok(rest.length >= n, `an answer shorter than its Content-Length ${n}`);
      bodyBytes = rest.subarray(0, n);
    } else if (/chunked/i.test(headers.get('transfer-encoding') ?? '')) {
      const { body: decoded, end } = dechunk(data, at);
      bodyBytes = decoded;
      at = end - bodyBytes.length; // so that `at += bodyBytes.length` lands on `end`
    } else {
      bodyBytes = rest;
    }
    at += bodyBytes.length;
    answers.push({ status, headers, body: bodyBytes.toString('utf8') });
  }
  return answers;
}
