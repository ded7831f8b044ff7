// The fingerprint of what an operation asks for, stored with its idempotency record: the same
// operationId with another fingerprint is a conflict, not a duplicate.
import { createHash } from 'node:crypto';
import type { TransferRequest } from './transfer-request.ts';

export function requestHash(request: TransferRequest): string {
  // Unambiguous: fields are joined with a separator that no field can contain.
  const canonical = ['v1', request.from, request.to, request.amountMinor.toString(), request.currency ?? ''].join('\n');
  return createHash('sha256').update(canonical).digest('hex');
}
