// Progress of a long command on stderr. Hand-written rather than a library: on a terminal it
// is one line redrawn with `\r` at most ten times a second, elsewhere (a log file, CI) a
// plain count every so many items; neither needs more than this file.

/** The part of a stream progress writes to; process.stderr in the CLI. */
export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(text: string): unknown;
}

export interface ProgressOptions {
  /** What is counted, plural: "lines", "plants". */
  unit: string;
  /** The verb of the count: "imported", "exported". */
  verb: string;
  /** Redraw interval on a terminal, ms. */
  intervalMs?: number;
  /** When not a terminal: a line every this many items. */
  every?: number;
  now?: () => number;
}

export interface Progress {
  /** `done` items so far; `fraction` of the whole when it is known (0 to 1); `note` after it. */
  update(done: number, fraction?: number, note?: string): void;
  /**
   * Clears the bar on a terminal, for the summary that follows; given `total`, is that
   * summary ("exported 20000 plants"), said once: not again where the last count said it.
   */
  finish(total?: number): void;
}

const BAR_WIDTH = 24;

function bar(fraction: number): string {
  const filled = Math.round(Math.min(1, Math.max(0, fraction)) * BAR_WIDTH);
  return `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${Math.floor(fraction * 100)
    .toString()
    .padStart(3)}%`;
}

export function progress(stream: ProgressStream, options: ProgressOptions): Progress {
  const { unit, verb, intervalMs = 100, every = 10_000, now = Date.now } = options;
  const count = (done: number, note?: string) =>
    `${verb} ${done} ${unit}${note ? `, ${note}` : ''}`;
  if (!stream.isTTY) {
    let reported = 0;
    let said: string | undefined;
    return {
      update(done, _fraction, note) {
        if (done - reported < every) return;
        reported = done - (done % every);
        said = `${count(done, note)}\n`;
        stream.write(said);
      },
      finish(total) {
        if (total !== undefined && said !== `${count(total)}\n`) stream.write(`${count(total)}\n`);
      },
    };
  }
  let drawn = -Infinity;
  return {
    update(done, fraction, note) {
      if (now() - drawn < intervalMs) return;
      drawn = now();
      const text = `${fraction === undefined ? '' : `${bar(fraction)} `}${count(done, note)}`;
      // Cut to the terminal's width: a wrapped line could not be redrawn by `\r`.
      stream.write(`\r${text.slice(0, (stream.columns || 80) - 1)}\x1b[K`);
    },
    finish(total) {
      if (drawn !== -Infinity) stream.write('\r\x1b[K');
      if (total !== undefined) stream.write(`${count(total)}\n`);
    },
  };
}
