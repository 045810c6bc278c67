import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { it } from 'node:test';
import { openPostgresStore } from '../../src/store/postgres/open.js';
import { fanOutAll } from '../helpers/fan-out.js';
import { freshDatabase, POSTGRES_SKIP } from '../helpers/postgres.js';

// On PostgreSQL, a message written by one process (its fan-out of a plant write's event)
// wakes the others (LISTEN/NOTIFY), so that every instance's dispatcher hears of it at once
// rather than at its next poll.

it(
  'a message written by another store on the database is heard',
  { skip: POSTGRES_SKIP, timeout: 20_000 },
  async (t) => {
    const url = await freshDatabase(t);
    const writer = await openPostgresStore({ url });
    const listener = await openPostgresStore({ url });
    t.after(async () => {
      await writer.close();
      await listener.close();
    });
    const heard = new EventEmitter();
    let local = 0;
    listener.webhookQueue.onMessages(() => (local += 1));
    const stop = listener.onRemoteMessages!(() => heard.emit('heard'));
    // A fresh LISTEN wakes its listeners once, for anything written before it was in place.
    await once(heard, 'heard');
    await writer.webhooks.create({
      url: 'https://example.com/hook',
      events: ['plant.created'],
      secret: 'whsec_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=',
      at: new Date(),
    });
    const woken = once(heard, 'heard');
    await writer.plants.insert({ name: 'Fern' });
    assert.equal(await fanOutAll(writer), 1);
    await woken;
    // The in-process signal is the writer's own: the listener's store wrote nothing.
    assert.equal(local, 0);
    stop();
  },
);
