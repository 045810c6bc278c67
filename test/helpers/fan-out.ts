import type { Store } from '../../src/store/store.js';

/**
 * Fans out until no endpoint has anything to get, as the fan-out of a `serve` process would
 * (it runs none in the store and HTTP tests): the messages of the writes made so far are in
 * the queue when it resolves, as many as each endpoint has room for. Answers how many
 * messages it wrote.
 */
export async function fanOutAll(
  store: Pick<Store, 'webhookEvents'>,
  maxMessages = 1000,
): Promise<number> {
  let messages = 0;
  for (;;) {
    const step = await store.webhookEvents.fanOut(maxMessages);
    messages += step.messages;
    if (step.endpoints === 0) return messages;
  }
}
