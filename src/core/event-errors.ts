// The refusals of the changes feed: its cursors, with the positions that explain them, and
// its streams past their limit.

import { ApiError } from './errors.js';

/** A cursor below the horizon: events after it may have been pruned (410, 41001). */
export const eventsPruned = (after: bigint, horizon: bigint) =>
  new ApiError(
    'eventsGone',
    `Events after position ${after} are no longer kept (the oldest kept is above ` +
      `${horizon}): read GET /plants again and follow the events from there.`,
  );

/** A cursor past the newest event: it names events this log never had (410, 41001). */
export const eventsPastHead = (after: bigint, head: bigint) =>
  new ApiError(
    'eventsGone',
    `Position ${after} is past this store's newest event (${head}): it comes from another ` +
      'store, or from before this one was restored from a backup. Read GET /plants again and ' +
      'follow the events from there.',
  );

/** A stream or long poll past `--max-event-streams`, or while the server closes (503, 50302). */
export const noEventStreamLeft = (max: number | undefined) =>
  new ApiError(
    'tooManyEventStreams',
    max === undefined
      ? 'The server is shutting down.'
      : `This server has ${max} event streams open, the most it allows; retry later.`,
  );
