import { readFileSync } from 'node:fs';

/** The largest buffer TCP gives a socket for `way` (the third field of tcp_wmem, tcp_rmem). */
const largestBuffer = (way: 'wmem' | 'rmem') =>
  Number(readFileSync(`/proc/sys/net/ipv4/tcp_${way}`, 'utf8').trim().split(/\s+/)[2]);

/**
 * MiB more than the kernel's buffers on both sides can ever take of one connection: written
 * to a client that does not read, the rest stays in the process.
 */
export const beyondTheKernel = (): number =>
  Math.ceil((largestBuffer('wmem') + largestBuffer('rmem')) / (1 << 20)) + 1;
