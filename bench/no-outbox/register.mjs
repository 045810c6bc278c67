// `node --import bench/no-outbox/register.mjs bin/plantstore serve ...`: plantstore with its
// SQLite outbox replaced by one that writes nothing, the yardstick of what the outbox costs
// a write when no endpoint is subscribed (target: at most 5%). Nothing else changes: the
// same build, settings and statements, so the difference is the outbox's INSERT ... SELECT.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
