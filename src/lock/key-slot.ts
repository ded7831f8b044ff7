// Redis Cluster key slot of a key (CRC16/XMODEM of its hash tag, mod 16384), as CLUSTER KEYSLOT computes it.

export const CLUSTER_SLOT_COUNT = 16384;

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/** CRC-16/XMODEM (polynomial 0x1021, initial value 0, no reflection): the checksum Redis Cluster uses. */
export function crc16Xmodem(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit += 1) {
      crc = (crc & 0x8000) !== 0 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}

/**
 * The bytes Redis hashes for `key`: the content between the first `{` and the first `}` after
 * it, when that content is not empty; otherwise the whole key. Works on UTF-8 bytes, as Redis does.
 */
export function hashedPart(key: string): Uint8Array {
  const bytes = Buffer.from(key, 'utf8');
  const open = bytes.indexOf(OPEN_BRACE);
  if (open === -1) return bytes;
  const close = bytes.indexOf(CLOSE_BRACE, open + 1);
  if (close === -1 || close === open + 1) return bytes;
  return bytes.subarray(open + 1, close);
}

export function keySlot(key: string): number {
  return crc16Xmodem(hashedPart(key)) % CLUSTER_SLOT_COUNT;
}
