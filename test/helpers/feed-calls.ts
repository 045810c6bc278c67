import assert from 'node:assert/strict';
import type { Server } from './server-process.js';

/** Requests to a test server with one bearer token: plants created, events' positions read. */
export function feedCalls(bearer: string) {
  const call = (server: Server, path: string, init: RequestInit = {}) =>
    fetch(`${server.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    });
  /** Creates a plant; answers its id and entity tag. */
  const create = async (server: Server, name: string) => {
    const res = await call(server, '/plants', { method: 'POST', body: JSON.stringify({ name }) });
    assert.equal(res.status, 201);
    const id = BigInt(/"id":(\d+)/.exec(await res.text())![1]!);
    return { id, etag: res.headers.get('etag')! };
  };
  /** The positions of the events after `after`, one page. */
  const positions = async (server: Server, after: bigint) => {
    const res = await call(server, `/events?after=${after}`);
    assert.equal(res.status, 200);
    return [...(await res.text()).matchAll(/"position":(\d+)/g)].map((m) => BigInt(m[1]!));
  };
  /** Asserts that reading after each of `cursors` is 410 (41001): read the plants again. */
  const gone = async (server: Server, cursors: bigint[]) => {
    for (const cursor of cursors) {
      const res = await call(server, `/events?after=${cursor}`);
      assert.equal(res.status, 410, `cursor ${cursor}`);
      assert.match(await res.text(), /"error":41001/);
    }
  };
  return { call, create, positions, gone };
}
