import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseTrustProxy } from '../../src/cli/options.js';

test('--trust-proxy takes addresses, CIDR ranges and the proxy-addr names', () => {
  assert.equal(parseTrustProxy('off'), false);
  assert.equal(
    parseTrustProxy('127.0.0.1, 10.0.0.0/8,::1,fd00::/8,loopback,linklocal,uniquelocal'),
    '127.0.0.1,10.0.0.0/8,::1,fd00::/8,loopback,linklocal,uniquelocal',
  );
  for (const bad of ['', 'localhost', '10.0.0.0/8/8', '::1/129', '10.0.0.256', 'all']) {
    assert.throws(() => parseTrustProxy(bad), /is not a proxy address/, bad);
  }
});
