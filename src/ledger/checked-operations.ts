// What both doors (the intake and BullMQ straight) check before sending any operation: each wire
// by the worker's own rules, the first one refused named in an InvalidTransferError. Apart from
// the producer (src/queue/producer.ts) so that the intake checks the same way without loading BullMQ.
import { InvalidTransferError } from '../errors.ts';
import { type OperationWire, validateOperationRequest } from './transfer-request.ts';

/**
 * The wires, each validated by the worker's rules (HOLD_EXPIRY_MAX_MS for a hold's expiry), or
 * InvalidTransferError naming the first one refused: what both doors check before sending any.
 */
export function checkedOperations(
  wires: readonly OperationWire[],
  amountMax: bigint,
  holdExpiryMaxMs: number,
): readonly OperationWire[] {
  return wires.map((wire, i) => {
    const result = validateOperationRequest(wire, amountMax, holdExpiryMaxMs);
    if (!result.ok)
      throw new InvalidTransferError(`${wires.length > 1 ? `operation #${i + 1}: ` : ''}${result.reason}`);
    return wire;
  });
}
