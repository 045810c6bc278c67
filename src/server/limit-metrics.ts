import client from 'prom-client';
import type { Metrics } from '../core/metrics.js';

/** What a process holds open against its limits: event streams, and connections. */
export function limitInstruments(
  registers: client.Registry[],
): Pick<Metrics, 'eventStreams' | 'connections' | 'closedAtLimit'> {
  const eventStreams = new client.Gauge({
    name: 'plantstore_event_streams',
    help: 'Event streams and waiting long polls of GET /events open, of --max-event-streams a process.',
    registers,
  });
  const connections = new client.Gauge({
    name: 'plantstore_http_connections',
    help: 'Connections open, of --max-connections a process.',
    registers,
  });
  const closedAtLimit = new client.Counter({
    name: 'plantstore_http_connections_closed_at_limit_total',
    help: 'Connections closed at --max-connections: idle or stalled ones to make room, new ones refused.',
    labelNames: ['reason'] as const,
    registers,
  });
  return {
    eventStreams: (open) => eventStreams.set(open),
    connections: (open) => connections.set(open),
    closedAtLimit: (reason) => closedAtLimit.inc({ reason }),
  };
}
