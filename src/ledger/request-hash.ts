// The fingerprint of what an operation asks for, stored with its idempotency record: the same
// operationId with another fingerprint is a conflict, not a duplicate. request_operation() in SQL
// computes the same lines for the intake, so the two must agree to the byte.
import { createHash } from 'node:crypto';
import { isPaymentRequest, type Metadata, type OperationRequest } from './transfer-request.ts';

/**
 * The canonical lines of a request, joined with "\n" before hashing. Unambiguous: no field can
 * contain the separator (ids, currencies, amounts and expiry instants have fixed alphabets), and
 * every kind has a fixed number of lines but a split, whose legs come last in pairs. A transfer's
 * lines are its first version's, unchanged, so stored transfers keep their fingerprints; its kind
 * is not among them, said or not. An absent optional field is the empty line.
 */
export function requestHashLines(request: OperationRequest): string[] {
  return [...kindLines(request), ...metadataLines(request.metadata)];
}

/** The lines of a request's own fields, per kind. */
function kindLines(request: OperationRequest): string[] {
  if (!isPaymentRequest(request)) {
    return ['v1', request.from, request.to, request.amountMinor.toString(), request.currency ?? ''];
  }
  switch (request.kind) {
    case 'hold':
      return [
        'v2',
        'hold',
        request.from,
        request.to,
        request.amountMinor.toString(),
        request.currency ?? '',
        request.expiresInMs === null ? '' : String(request.expiresInMs),
        request.expiresAt ?? '',
      ];
    case 'capture':
      return ['v2', 'capture', request.from, request.hold, request.amountMinor?.toString() ?? ''];
    case 'void':
      return ['v2', 'void', request.from, request.hold];
    case 'refund':
      return ['v2', 'refund', request.from, request.original, request.amountMinor?.toString() ?? ''];
    case 'split':
      return [
        'v2',
        'split',
        request.from,
        request.currency ?? '',
        ...request.legs.flatMap((leg) => [leg.to, leg.amountMinor.toString()]),
      ];
    case 'credit_limit':
      return ['v2', 'credit_limit', request.from, request.limitMinor.toString()];
    case 'deposit':
      return ['v2', 'deposit', request.to, request.amountMinor.toString(), request.currency, request.reference];
    case 'withdrawal':
      return ['v2', 'withdrawal', request.from, request.amountMinor.toString(), request.currency, request.reference];
    // Absent fields hash as their defaults: a wire that says them is the same request.
    case 'open_wallet':
      return ['v2', 'open_wallet', request.wallet, request.currency, (request.creditLimitMinor ?? 0n).toString()];
    case 'freeze_wallet':
      return ['v2', 'freeze_wallet', request.wallet, request.credits ?? 'allowed'];
    case 'unfreeze_wallet':
    case 'close_wallet':
      return ['v2', request.kind, request.wallet];
  }
}

export function requestHash(request: OperationRequest): string {
  return createHash('sha256').update(requestHashLines(request).join('\n')).digest('hex');
}

/**
 * The lines metadata adds to a request's: none when it has none (absent or `{}`), so every hash
 * stored before metadata existed stays as it was; else one line `key=value` per key, in byte order
 * (ASCII keys: the order request_metadata_lines() uses in SQL). No line of any kind's own holds
 * `=` where a metadata line can stand (ids, amounts; a reference's line has a fixed place), and
 * keys hold none, so the lines read back one way.
 */
export function metadataLines(metadata: Metadata | undefined): string[] {
  if (metadata === undefined) return [];
  return Object.keys(metadata)
    .sort()
    .map((key) => `${key}=${metadata[key] ?? ''}`);
}
