import { type ClientOptions, createClient } from '../../packages/client/src/index.js';

/**
 * A client of plants.test whose requests go to `fetch` and whose waits between attempts are
 * not waited but recorded, in `slept`.
 */
export function recordingClient(
  fetch: typeof globalThis.fetch,
  options: Partial<ClientOptions> = {},
) {
  const slept: number[] = [];
  const client = createClient({
    baseUrl: 'http://plants.test:8080/',
    token: 'pst_x',
    fetch,
    sleep: async (ms) => {
      slept.push(ms);
    },
    ...options,
  });
  return { client, slept };
}
