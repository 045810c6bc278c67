import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { ROOT } from '../helpers/server-process.js';

// The server's log destination holds lines until the end of a turn: they must still be
// written when the process ends within that turn, cleanly or on a fatal error.

const LINES = 500;

/** Runs a process that logs LINES lines through the destination, then ends as `how` says. */
function logThenEnd(how: 'exit' | 'throw' | 'reject'): Promise<{ stdout: string; code: number }> {
  const script = `
    import pino from 'pino';
    import { stdoutLogDestination } from './src/server/log-destination.ts';
    const logger = pino({ base: null }, stdoutLogDestination());
    for (let i = 0; i < ${LINES}; i++) logger.info({ i }, 'line');
    if (${JSON.stringify(how)} === 'exit') process.exit(3);
    if (${JSON.stringify(how)} === 'throw') throw new Error('fatal');
    void Promise.reject(new Error('fatal'));
  `;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '--eval', script],
      { cwd: ROOT },
      (error, stdout) => resolve({ stdout, code: (error?.code as number | undefined) ?? 0 }),
    );
  });
}

for (const how of ['exit', 'throw', 'reject'] as const) {
  test(`every line logged in the last turn is written when the process ends (${how})`, async () => {
    const { stdout, code } = await logThenEnd(how);
    assert.notEqual(code, 0);
    const lines = stdout.trimEnd().split('\n');
    assert.equal(lines.length, LINES);
    assert.deepEqual(
      lines.map((line) => (JSON.parse(line) as { i: number }).i),
      Array.from({ length: LINES }, (_, i) => i),
    );
  });
}
