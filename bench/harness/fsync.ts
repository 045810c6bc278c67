/**
 * The fsync yardstick: how long the disk under the benchmark's databases takes to make an
 * appended page durable, measured in the same run as the writes it is a yardstick for.
 */
import { closeSync, fdatasyncSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { median } from './summary.js';

/**
 * The median, in milliseconds, of `count` appends of one 4 KiB page followed by fdatasync
 * (what SQLite does to commit in WAL mode with synchronous=FULL), in a file in `dir`.
 */
export function fsyncP50ms(dir: string, count = 200): number {
  const file = join(dir, 'fsync-probe');
  const fd = openSync(file, 'w');
  const page = Buffer.alloc(4096, 1);
  const times: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const start = performance.now();
      writeSync(fd, page);
      fdatasyncSync(fd);
      times.push(performance.now() - start);
    }
  } finally {
    closeSync(fd);
    rmSync(file, { force: true });
  }
  return median(times);
}
