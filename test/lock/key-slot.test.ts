// Unit tests of the Redis Cluster key-slot helper and the lock's key names (the real
// CLUSTER KEYSLOT comparison is in cluster.test.ts).
import { describe, expect, it } from 'vitest';
import { crc16Xmodem, hashedPart, keySlot } from '../../src/lock/key-slot.ts';
import { lockKeysOf, WALLET_ID_LENGTH_MAX } from '../../src/lock/lock-keys.ts';

describe('crc16Xmodem', () => {
  it('matches the CRC-16/XMODEM check value', () => {
    // The catalogue check value for "123456789", also quoted in the Redis Cluster specification.
    expect(crc16Xmodem(Buffer.from('123456789'))).toBe(0x31c3);
    expect(crc16Xmodem(Buffer.from(''))).toBe(0);
  });
});

describe('keySlot', () => {
  it('matches slots Redis documents for CLUSTER KEYSLOT', () => {
    expect(keySlot('somekey')).toBe(11058);
    expect(keySlot('foo{hash_tag}')).toBe(2515);
  });

  it('hashes only the first non-empty {...} section, as Redis does', () => {
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    expect(Buffer.from(hashedPart('foo{bar}{zap}')).toString()).toBe('bar');
    expect(Buffer.from(hashedPart('foo{{bar}}zap')).toString()).toBe('{bar');
    expect(Buffer.from(hashedPart('foo{}{bar}')).toString()).toBe('foo{}{bar}');
    expect(Buffer.from(hashedPart('foo{bar')).toString()).toBe('foo{bar');
    expect(Buffer.from(hashedPart('plain')).toString()).toBe('plain');
  });

  it('puts both keys of a wallet in one slot, whatever the prefix', () => {
    for (const walletId of [
      'w1',
      'wallet-42',
      '0f8c6a1e-5b8e-4c1e-9a57-2b7d3f0e9c11',
      'ü-ø',
      'x'.repeat(WALLET_ID_LENGTH_MAX),
    ]) {
      for (const prefix of ['', 'ft:', 'tenant-a:ft:']) {
        const keys = lockKeysOf(prefix, walletId);
        expect(keySlot(keys.lockKey)).toBe(keySlot(keys.fenceKey));
        expect(keySlot(keys.lockKey)).toBe(keySlot(`{wallet:${walletId}}`));
      }
    }
  });
});

describe('lockKeysOf', () => {
  it('names the two keys with the prefix in front of the hash tag', () => {
    expect(lockKeysOf('ft:', 'w1')).toEqual({ lockKey: 'ft:{wallet:w1}:lock', fenceKey: 'ft:{wallet:w1}:fence' });
  });

  it('refuses ids and prefixes that would move the hash tag or are unbounded', () => {
    expect(() => lockKeysOf('ft:', '')).toThrow(RangeError);
    expect(() => lockKeysOf('ft:', 'a}b')).toThrow(RangeError);
    expect(() => lockKeysOf('ft:', 'a{b')).toThrow(RangeError);
    expect(() => lockKeysOf('ft:', 'a b')).toThrow(RangeError);
    expect(() => lockKeysOf('ft:', 'a\u0000b')).toThrow(RangeError);
    expect(() => lockKeysOf('ft:', 'x'.repeat(WALLET_ID_LENGTH_MAX + 1))).toThrow(RangeError);
    expect(() => lockKeysOf('{ft}:', 'w1')).toThrow(RangeError);
    expect(() => lockKeysOf('p'.repeat(65), 'w1')).toThrow(RangeError);
  });
});
