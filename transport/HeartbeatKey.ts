import { isOperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { HeldOperation, WorkerHeartbeat } from './Transport.ts';

const TOKEN = /^[A-Za-z0-9_=-]{1,128}$/;
const PREFIX = 'worker.';

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
 * The KV key of a worker's heartbeat, `worker.<workerId>`. Throws `BAD_INPUT` when the id is not
 * key-safe (a dot would shift the parts).
 *
 * @example
 * ```ts
 * workerHeartbeatKey('w-7'); // 'worker.w-7'
 * ```
 */
export function workerHeartbeatKey(workerId: string): string {
  checkToken('workerId', workerId);
  return `${PREFIX}${workerId}`;
}

/**
 * The stored value of a heartbeat: the held operations as `[kind, operationId, attempt]` triples
 * (compact: a worker with 256 operations writes about 14 KB). Throws `BAD_INPUT` for an operation
 * that is not key-safe.
 *
 * @example
 * ```ts
 * encodeHeld([{ kind: OperationKind.UNPACK, operationId: 'op1', attempt: 2 }]); // '{"held":[["unpack","op1",2]]}'
 * ```
 */
export function encodeHeld(held: readonly HeldOperation[]): string {
  for (const h of held) {
    if (!isOperationKind(h.kind)) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `Unknown operation kind ${String(h.kind)}.`,
      );
    }
    checkToken('operationId', h.operationId);
  }
  return JSON.stringify({ held: held.map((h) => [h.kind, h.operationId, h.attempt]) });
}

/**
 * Parses a stored heartbeat back; `undefined` for a key or value that is not a worker heartbeat
 * (a foreign key in the bucket is ignored, never trusted).
 *
 * @example
 * ```ts
 * parseWorkerHeartbeat('worker.w-7', '{"held":[["unpack","op1",2]]}', 1_700_000_000_000);
 * ```
 */
export function parseWorkerHeartbeat(
  key: string,
  value: string,
  at: number,
): WorkerHeartbeat | undefined {
  if (!key.startsWith(PREFIX)) return undefined;
  const workerId = key.slice(PREFIX.length);
  if (!TOKEN.test(workerId)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  const list = (parsed as { held?: unknown } | null)?.held;
  if (!Array.isArray(list)) return undefined;
  const held: HeldOperation[] = [];
  for (const item of list) {
    if (!Array.isArray(item) || item.length !== 3) return undefined;
    const [kind, operationId, attempt] = item as [unknown, unknown, unknown];
    if (!isOperationKind(kind) || typeof operationId !== 'string' || !TOKEN.test(operationId))
      return undefined;
    if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 1)
      return undefined;
    held.push({ kind, operationId, attempt });
  }
  return { workerId, at, held };
}

/**
 * Whether a fresh heartbeat (younger than `timeoutMs` at `now`) holds the operation (at `attempt`,
 * when given).
 *
 * @example
 * ```ts
 * holdsAlive(await heartbeats.list(), Date.now(), timing.heartbeatTimeoutMs, kind, id, 2);
 * ```
 */
export function holdsAlive(
  beats: readonly WorkerHeartbeat[],
  now: number,
  timeoutMs: number,
  kind: string,
  operationId: string,
  attempt?: number,
): boolean {
  return beats.some(
    (b) =>
      now - b.at < timeoutMs &&
      b.held.some(
        (h) =>
          h.kind === kind &&
          h.operationId === operationId &&
          (attempt === undefined || h.attempt === attempt),
      ),
  );
}
