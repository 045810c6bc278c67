import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import {
  AddressPolicy,
  addressClass,
  parseNetworks,
} from '../../src/core/webhooks/address-policy.js';
import {
  DEFAULT_RETRY_SCHEDULE_MS,
  formatDelay,
  nextAttemptAt,
  parseRetrySchedule,
} from '../../src/core/webhooks/retry-schedule.js';
import { newSecret, secretKey, signatureHeader } from '../../src/core/webhooks/signature.js';

// The pure parts of sending webhooks: which addresses may be reached, the retry schedule,
// and the Standard Webhooks signature (checked with the standardwebhooks package).

describe('addressClass', () => {
  const refused: [string, string][] = [
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['fe80::1', 'linkLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['100.127.255.254', 'carrierGradeNat'],
    ['fc00::1', 'uniqueLocal'],
    ['fd12:3456::1', 'uniqueLocal'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['192.0.2.10', 'reserved'],
    ['198.51.100.7', 'reserved'],
    ['203.0.113.200', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'linkLocal'],
    ['64:ff9b::a00:1', 'rfc6052'],
    ['2002:a00:1::', '6to4'],
    ['4000::1', 'unassigned'],
  ];
  for (const [address, expected] of refused) {
    it(`classes ${address} as ${expected}`, () => {
      assert.equal(addressClass(address), expected);
    });
  }

  it('classes public addresses as public, IPv4-mapped ones too', () => {
    for (const address of ['93.184.215.14', '8.8.8.8', '2606:4700::6810:85e5', '::ffff:8.8.4.4']) {
      assert.equal(addressClass(address), 'public', address);
    }
  });

  it('takes a bracketed IPv6 host as a URL writes it', () => {
    assert.equal(addressClass('[::1]'), 'loopback');
  });
});

describe('AddressPolicy', () => {
  it('refuses non-public addresses and says which class', () => {
    const policy = new AddressPolicy();
    assert.deepEqual(policy.verdict('127.0.0.1'), { allowed: false, class: 'loopback' });
    assert.deepEqual(policy.verdict('8.8.8.8'), { allowed: true });
    assert.deepEqual(policy.verdict('not-an-ip'), { allowed: false, class: 'not an IP address' });
  });

  it('opens the networks allowed, and only those', () => {
    const policy = new AddressPolicy(parseNetworks('127.0.0.0/8, ::1/128,10.1.0.0/16'));
    assert.equal(policy.verdict('127.0.0.1').allowed, true);
    assert.equal(policy.verdict('::ffff:127.0.0.1').allowed, true);
    assert.equal(policy.verdict('::1').allowed, true);
    assert.equal(policy.verdict('10.1.200.3').allowed, true);
    assert.deepEqual(policy.verdict('10.2.0.1'), { allowed: false, class: 'private' });
    assert.deepEqual(policy.verdict('169.254.169.254'), { allowed: false, class: 'linkLocal' });
  });

  it('refuses malformed network lists with a usable message', () => {
    assert.throws(() => parseNetworks('127.0.0.1'), /"127.0.0.1" is not a network/);
    assert.throws(() => parseNetworks('10.0.0.0/33'), /is not a network/);
    assert.throws(() => parseNetworks('localhost/8'), /is not a network/);
  });
});

describe('retry schedule', () => {
  it('defaults to 5s, 5m, 30m, 2h, 5h, 10h, 10h after the first attempt', () => {
    assert.equal(DEFAULT_RETRY_SCHEDULE_MS.map(formatDelay).join(','), '5s,5m,30m,2h,5h,10h,10h');
    assert.deepEqual(parseRetrySchedule('5s,5m,30m,2h,5h,10h,10h'), DEFAULT_RETRY_SCHEDULE_MS);
  });

  it('parses 0s as at once and refuses what is not a duration', () => {
    assert.deepEqual(parseRetrySchedule('0s, 1s,2m'), [0, 1000, 120_000]);
    assert.throws(() => parseRetrySchedule('5s,soon'), /"soon" is not a duration/);
    assert.throws(() => parseRetrySchedule(''), /is not a duration/);
  });

  const now = new Date(Date.UTC(2024, 0, 1));
  const at = (attempt: number, random: number, retryAfterMs: number | null = null) =>
    nextAttemptAt([5000, 300_000], { attempt, now, retryAfterMs }, () => random)?.getTime();

  it('spreads each delay over ±20%', () => {
    assert.equal(at(1, 0), now.getTime() + 4000);
    assert.equal(at(1, 0.5), now.getTime() + 5000);
    assert.equal(at(1, 0.999999), now.getTime() + 6000);
    assert.equal(at(2, 0.5), now.getTime() + 300_000);
  });

  it('gives up after the last delay', () => {
    assert.equal(at(3, 0.5), undefined);
    assert.equal(at(10, 0.5), undefined);
  });

  it('lets Retry-After lengthen the delay, never shorten it, up to 24 hours', () => {
    assert.equal(at(1, 0.5, 60_000), now.getTime() + 60_000);
    assert.equal(at(1, 0.5, 1000), now.getTime() + 5000);
    assert.equal(at(1, 0.5, 7 * 86_400_000), now.getTime() + 86_400_000);
  });
});

describe('signature', () => {
  it('makes whsec_ secrets of 32 random bytes', () => {
    const secret = newSecret();
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(secretKey(secret).length, 32);
    assert.notEqual(newSecret(), secret);
  });

  it('refuses a secret that is not whsec_ and base64', () => {
    assert.throws(() => secretKey('abc'), /whsec_/);
    assert.throws(() => secretKey('whsec_!!!'), /whsec_/);
  });

  it('verifies with the standardwebhooks package', () => {
    const secret = newSecret();
    const body = '{"id":9223372036854775807,"name":"Fern"}';
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader([secret], 'msg_1', timestamp, body),
    };
    assert.deepEqual(new Webhook(secret).verify(body, headers), {
      id: 9223372036854776000,
      name: 'Fern',
    });
    assert.throws(() => new Webhook(newSecret()).verify(body, headers));
    assert.throws(() => new Webhook(secret).verify(body.replace('Fern', 'Fir'), headers));
  });

  it('signs with each secret during a rotation, and either verifies', () => {
    const [current, previous] = [newSecret(), newSecret()];
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = signatureHeader([current, previous], 'msg_2', timestamp, '{}');
    assert.equal(signature.split(' ').length, 2);
    const headers = {
      'webhook-id': 'msg_2',
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signature,
    };
    assert.deepEqual(new Webhook(current).verify('{}', headers), {});
    assert.deepEqual(new Webhook(previous).verify('{}', headers), {});
  });

  it('matches a vector computed apart (Python hmac)', () => {
    const secret = 'whsec_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=';
    assert.equal(
      signatureHeader([secret], 'msg_x', 1700000000, '{"a":1}'),
      'v1,HO7qVMUI4WL0CQ4f6n5dPNNetlM8wJlkQdV5Hrq8Z5Y=',
    );
  });
});
