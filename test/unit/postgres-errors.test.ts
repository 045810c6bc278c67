import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { isUnavailable } from '../../src/store/postgres/query.js';

// Which failures of a PostgreSQL call are answered 503 (try again) rather than 500 (a bug).
// Needs no database: the errors are built as pg and Node build them.

function databaseError(code: string): pg.DatabaseError {
  const error = new pg.DatabaseError('server says no', 0, 'error');
  error.code = code;
  return error;
}

function systemError(code: string, syscall: string): Error {
  return Object.assign(new Error(`${syscall} ${code}`), { code, syscall, errno: -32 });
}

test('outages and transient conflicts are unavailable (503)', () => {
  const cases: [string, unknown][] = [
    ['connection failure 08006', databaseError('08006')],
    ['admin shutdown 57P01', databaseError('57P01')],
    ['too many connections 53300', databaseError('53300')],
    ['serialization failure 40001', databaseError('40001')],
    ['deadlock 40P01', databaseError('40P01')],
    ['read-only server after a failover 25006', databaseError('25006')],
    ['password rejected during a rotation 28P01', databaseError('28P01')],
    ['database missing 3D000', databaseError('3D000')],
    ['broken pipe (five capital letters, not a SQLSTATE)', systemError('EPIPE', 'write')],
    ['refused', systemError('ECONNREFUSED', 'connect')],
    ['reset', systemError('ECONNRESET', 'read')],
    ['pg: terminated', new Error('Connection terminated unexpectedly')],
    ['pg-pool: no connection in time', new Error('timeout exceeded when trying to connect')],
    ['pg: query timeout', new Error('Query read timeout')],
  ];
  for (const [what, error] of cases) assert.equal(isUnavailable(error), true, what);
});

test('bad statements and programming errors are not (500)', () => {
  const cases: [string, unknown][] = [
    ['unique violation 23505', databaseError('23505')],
    ['invalid text 22021', databaseError('22021')],
    ['syntax error 42601', databaseError('42601')],
    ['a TypeError of our own', new TypeError('cannot read properties of undefined')],
    ['not an Error at all', 'boom'],
  ];
  for (const [what, error] of cases) assert.equal(isUnavailable(error), false, what);
});
