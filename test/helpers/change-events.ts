import type { FastifyBaseLogger } from 'fastify';
import type { ChangeEvent } from '../../src/core/change-events.js';

/** The feed's event at `position`: a plant created, its id the position. */
export const changeEvent = (position: bigint): ChangeEvent => ({
  position,
  type: 'plant.created',
  at: new Date(0),
  data: `{"id":${position},"name":"p${position}"}`,
});

/** A logger for an event stream under test, which has nothing to say that a test reads. */
export const quietLog = { info() {}, warn() {} } as unknown as FastifyBaseLogger;
