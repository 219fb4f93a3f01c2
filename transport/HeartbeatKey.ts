import { isOperationKind, type OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { HeartbeatKey } from './Transport.ts';

const TOKEN = /^[A-Za-z0-9_=-]{1,128}$/;

function checkToken(name: string, value: string): void {
  if (!TOKEN.test(value)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `Heartbeat ${name} ${JSON.stringify(value)} is not key-safe: use 1–128 letters, digits, "-", "_" or "=" (no dots).`,
      { details: { [name]: value } },
    );
  }
}

/**
 * The KV key of a heartbeat: `<kind>.<operationId>.<taskId>`. Throws `BAD_INPUT` when a part is
 * not key-safe (a dot would shift the parts).
 *
 * @example
 * ```ts
 * heartbeatKeyString({ kind: OperationKind.TRANSFER, operationId: 'op1', taskId: 'w1-7' });
 * // 'transfer.op1.w1-7'
 * ```
 */
export function heartbeatKeyString(key: HeartbeatKey): string {
  if (!isOperationKind(key.kind)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `Unknown operation kind ${String(key.kind)}.`,
      {
        details: { kind: key.kind },
      },
    );
  }
  checkToken('operationId', key.operationId);
  checkToken('taskId', key.taskId);
  return `${key.kind}.${key.operationId}.${key.taskId}`;
}

/** The key prefix (`<kind>.<operationId>.`) shared by every task of one operation. */
export function operationHeartbeatPrefix(kind: OperationKind, operationId: string): string {
  checkToken('operationId', operationId);
  return `${kind}.${operationId}.`;
}

/**
 * Parses a KV key back into its parts; `undefined` for a key that is not a heartbeat key.
 *
 * @example
 * ```ts
 * parseHeartbeatKey('transfer.op1.w1-7'); // { kind: 'transfer', operationId: 'op1', taskId: 'w1-7' }
 * ```
 */
export function parseHeartbeatKey(key: string): HeartbeatKey | undefined {
  const parts = key.split('.');
  if (parts.length !== 3) return undefined;
  const [kind, operationId, taskId] = parts as [string, string, string];
  if (!isOperationKind(kind) || !TOKEN.test(operationId) || !TOKEN.test(taskId)) return undefined;
  return { kind, operationId, taskId };
}
