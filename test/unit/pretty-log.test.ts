import assert from 'node:assert/strict';
import { test } from 'node:test';
import { prettyLogLine } from '../../src/server/pretty-log.js';

// The server's log on a terminal: pino's JSON lines as lines for a person.

const at = new Date(2026, 10, 21, 8, 5, 3, 42).getTime(); // local time 08:05:03.042

test('time, level and message, then the other fields as key=value', () => {
  const line = JSON.stringify({
    level: 30,
    time: at,
    pid: 7,
    hostname: 'h',
    reqId: 'req-1',
    method: 'GET',
    url: '/plants?limit=2',
    status: 200,
    durationMs: 1.5,
    tokenId: null,
    msg: 'request',
  });
  assert.equal(
    prettyLogLine(`${line}\n`, false),
    '08:05:03.042 INFO  request reqId=req-1 method=GET url="/plants?limit=2" status=200 ' +
      'durationMs=1.5 tokenId=null\n',
  );
  assert.equal(
    prettyLogLine(`${JSON.stringify({ level: 40, time: at, msg: 'slow' })}\n`, true),
    '\x1b[2m08:05:03.042\x1b[0m \x1b[33mWARN \x1b[0m slow\n',
  );
});

test("an error's stack on the lines after, indented; what could act on the terminal escaped", () => {
  const line = JSON.stringify({
    level: 50,
    time: at,
    err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at f (a.js:1:1)' },
    name: 'Fern\u001b[2J',
    msg: 'request failed\u202e',
  });
  assert.equal(
    prettyLogLine(`${line}\n`, false),
    '08:05:03.042 ERROR request failed\\u{202e} name="Fern\\u001b[2J"\n' +
      '    Error: boom\n' +
      '        at f (a.js:1:1)\n',
  );
});

test('a line that is not a JSON object is passed on as it is', () => {
  for (const line of ['not json\n', '[1,2]\n', '"text"\n'])
    assert.equal(prettyLogLine(line, true), line);
});
