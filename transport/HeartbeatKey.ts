import { describeValue } from '../machines/describeValue.ts';
import { isOperationKind, OPERATION_KINDS } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { HeldOperation, WorkerHeartbeat, WorkerReads } from './Transport.ts';

const TOKEN = /^[A-Za-z0-9_=-]{1,128}$/;
const PREFIX = 'worker.';

function checkToken(name: string, value: unknown): void {
  if (typeof value !== 'string' || !TOKEN.test(value)) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `Heartbeat ${name} ${describeValue(value)} is not key-safe: use 1–128 letters, digits, "-", "_" or "=" (no dots).`,
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
 * The most bytes a heartbeat value may take (512 KiB: about 8,300 to 9,700 held operations with
 * ids of 36 characters, 54 to 63 bytes each by the kind's name). A worker never writes more (`heldThatFits`), the bucket refuses
 * larger puts, and a reader refuses a larger value it finds (`readWorkerHeartbeat`). It stays
 * under nats-server's default `max_payload` (1 MiB). At 64 KiB a worker of 2,500 slots (10,000 in
 * flight over four workers) could list fewer than half of what it held, and handed the rest back.
 */
export const MAX_HEARTBEAT_BYTES = 512 * 1024;

const INSTANCE = /^[A-Za-z0-9_-]{1,64}$/;

function checkHeld(held: readonly HeldOperation[], instance: string | undefined): void {
  if (instance !== undefined && (typeof instance !== 'string' || !INSTANCE.test(instance))) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `Heartbeat instance ${describeValue(instance)} is not a nonce: use 1–64 letters, digits, "-" or "_".`,
      { details: { instance } },
    );
  }
  for (const h of held) {
    if (!isOperationKind(h.kind)) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `Unknown operation kind ${describeValue(h.kind)}.`,
      );
    }
    checkToken('operationId', h.operationId);
    // What the reader refuses is never written: it would drop the whole heartbeat.
    if (!Number.isSafeInteger(h.attempt) || h.attempt < 1) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `Heartbeat attempt ${describeValue(h.attempt)} of ${h.operationId} is not a whole number ≥ 1.`,
      );
    }
  }
}

/**
 * A queue name as a heartbeat may carry it: its shape, not a list of today's routes, so that a
 * worker serving a route this reader does not know yet (a newer release's) still reads as alive.
 */
const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$/;

/** Why `reads` cannot be written or trusted, or undefined when it names queues and known kinds once each. */
function readsFault(queues: unknown, kinds: unknown): string | undefined {
  if (!Array.isArray(queues) || !queues.every((q) => typeof q === 'string' && QUEUE_NAME.test(q)))
    return 'the queues are not a list of queue names';
  if (new Set(queues).size !== queues.length) return 'the queues name one queue twice';
  if (!Array.isArray(kinds) || !kinds.every(isOperationKind))
    return 'the kinds are not a list of operation kinds';
  if (new Set(kinds).size !== kinds.length) return 'the kinds name one kind twice';
  return undefined;
}

function checkReads(reads: WorkerReads | undefined): void {
  if (reads === undefined) return;
  const fault =
    typeof reads === 'object' && reads !== null
      ? readsFault(reads.queues, reads.kinds)
      : 'they are not { queues, kinds }';
  if (fault !== undefined) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `Heartbeat reads ${describeValue(reads)}: ${fault}; list each queue the worker consumes once, by its queueName(route) (\`<site>_<location>_<location type>_<operation type>\`), and each of its kinds once (one of ${OPERATION_KINDS.join(', ')}).`,
      { details: { reads } },
    );
  }
}

const shell = (instance: string | undefined, reads: WorkerReads | undefined) => ({
  ...(instance === undefined ? {} : { instance }),
  ...(reads === undefined ? {} : { queues: reads.queues, kinds: reads.kinds }),
  held: [] as unknown[],
});
const triple = (h: HeldOperation) => [h.kind, h.operationId, h.attempt];

/**
 * The stored value of a heartbeat: the writing process's instance nonce (random per start, so two
 * processes given one worker id are told apart), the queues the worker reads and its kinds (when
 * given), and the held operations as `[kind, operationId, attempt]` triples (compact: a worker
 * with 256 operations writes about 14 KB; every queue and kind there is takes about 1 KB more).
 * Throws `BAD_INPUT` for an operation or instance that is not key-safe, for a queue or kind that
 * does not exist or is named twice, and for a value over `MAX_HEARTBEAT_BYTES` (list only
 * `heldThatFits` of them).
 *
 * @example
 * ```ts
 * encodeHeld([{ kind: OperationKind.UNPACK, operationId: 'op1', attempt: 2 }], 'n1',
 *   { queues: ['buffer_data_transfer_unpacking'], kinds: [OperationKind.UNPACK] });
 * // '{"instance":"n1","queues":["buffer_data_transfer_unpacking"],"kinds":["unpack"],"held":[["unpack","op1",2]]}'
 * ```
 */
export function encodeHeld(
  held: readonly HeldOperation[],
  instance?: string,
  reads?: WorkerReads,
): string {
  checkHeld(held, instance);
  checkReads(reads);
  const value = JSON.stringify({ ...shell(instance, reads), held: held.map(triple) });
  // Every part is ASCII (checked above): characters are bytes.
  if (value.length > MAX_HEARTBEAT_BYTES) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `A heartbeat listing ${held.length} operations takes ${value.length} bytes, over the ${MAX_HEARTBEAT_BYTES}-byte cap: list the first heldThatFits() of them, or lower the worker's concurrency.`,
      { details: { held: held.length, bytes: value.length, maxBytes: MAX_HEARTBEAT_BYTES } },
    );
  }
  return value;
}

/**
 * How many of `held`, in order, fit in one heartbeat value of at most `maxBytes`
 * (`encodeHeld(held.slice(0, n), instance, reads)` stays within the cap).
 *
 * @example
 * ```ts
 * const n = heldThatFits(held, instance, reads); if (n < held.length) warn(); beat(held.slice(0, n));
 * ```
 */
export function heldThatFits(
  held: readonly HeldOperation[],
  instance?: string,
  reads?: WorkerReads,
  maxBytes = MAX_HEARTBEAT_BYTES,
): number {
  let bytes = JSON.stringify(shell(instance, reads)).length;
  for (let i = 0; i < held.length; i++) {
    bytes += JSON.stringify(triple(held[i] as HeldOperation)).length + (i > 0 ? 1 : 0);
    if (bytes > maxBytes) return i;
  }
  return held.length;
}

/** A stored heartbeat as read: the heartbeat, or why it was refused. */
export type ReadHeartbeat =
  | { readonly ok: true; readonly beat: WorkerHeartbeat }
  | { readonly ok: false; readonly reason: string };

/**
 * Reads a stored heartbeat back. A value over `MAX_HEARTBEAT_BYTES`, or that is not a heartbeat
 * (bad JSON, an unknown kind, an id that is not key-safe, an attempt below 1, queues or kinds that
 * are not lists of known names each once, or one without the other), is refused with the reason,
 * never trusted in part. A value without an instance, or without queues and kinds (written by an
 * older worker), reads with `instance`, or `reads`, undefined.
 *
 * @example
 * ```ts
 * readWorkerHeartbeat('worker.w-7', '{"instance":"n1","held":[["unpack","op1",2]]}', clock.now());
 * ```
 */
export function readWorkerHeartbeat(key: string, value: string, at: number): ReadHeartbeat {
  const refuse = (reason: string): ReadHeartbeat => ({ ok: false, reason });
  if (!key.startsWith(PREFIX)) return refuse('the key is not worker.<id>');
  const workerId = key.slice(PREFIX.length);
  if (!TOKEN.test(workerId)) return refuse('the worker id is not key-safe');
  const bytes = Buffer.byteLength(value);
  if (bytes > MAX_HEARTBEAT_BYTES) {
    return refuse(`the value takes ${bytes} bytes, over the ${MAX_HEARTBEAT_BYTES}-byte cap`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return refuse('the value is not JSON');
  }
  const record = (parsed ?? {}) as {
    held?: unknown;
    instance?: unknown;
    queues?: unknown;
    kinds?: unknown;
  };
  const list = record.held;
  if (!Array.isArray(list)) return refuse('the value has no held list');
  const instance = record.instance;
  if (instance !== undefined && (typeof instance !== 'string' || !INSTANCE.test(instance))) {
    return refuse('the instance is not a nonce');
  }
  const { queues, kinds } = record;
  if ((queues === undefined) !== (kinds === undefined)) {
    return refuse(
      queues === undefined
        ? 'the value has kinds without queues'
        : 'the value has queues without kinds',
    );
  }
  const fault = queues === undefined ? undefined : readsFault(queues, kinds);
  if (fault !== undefined) return refuse(fault);
  const held: HeldOperation[] = [];
  for (const item of list) {
    if (!Array.isArray(item) || item.length !== 3) return refuse('a held entry is not a triple');
    const [kind, operationId, attempt] = item as [unknown, unknown, unknown];
    if (!isOperationKind(kind) || typeof operationId !== 'string' || !TOKEN.test(operationId))
      return refuse('a held entry names no operation');
    if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 1)
      return refuse('a held entry has no valid attempt');
    held.push({ kind, operationId, attempt });
  }
  return {
    ok: true,
    beat: {
      workerId,
      ...(instance === undefined ? {} : { instance }),
      at,
      held,
      ...(queues === undefined
        ? {}
        : { reads: { queues: queues as string[], kinds: kinds as WorkerReads['kinds'] } }),
    },
  };
}

/**
 * Parses a stored heartbeat back; `undefined` for a key or value that is not a worker heartbeat
 * (`readWorkerHeartbeat` says why).
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
  const read = readWorkerHeartbeat(key, value, at);
  return read.ok ? read.beat : undefined;
}

/**
 * Whether a fresh heartbeat (younger than `timeoutMs` at `now`) holds the operation (at `attempt`,
 * when given). With `holder` (the worker a START recorded), only that worker's heartbeat counts:
 * another worker listing a running operation does not keep it alive.
 *
 * @example
 * ```ts
 * holdsAlive(await heartbeats.list(), clock.now(), timing.heartbeatTimeoutMs, kind, id, 2, 'w-7');
 * ```
 */
export function holdsAlive(
  beats: readonly WorkerHeartbeat[],
  now: number,
  timeoutMs: number,
  kind: string,
  operationId: string,
  attempt?: number,
  holder?: string,
): boolean {
  return beats.some(
    (b) =>
      now - b.at < timeoutMs &&
      (holder === undefined || b.workerId === holder) &&
      b.held.some(
        (h) =>
          h.kind === kind &&
          h.operationId === operationId &&
          (attempt === undefined || h.attempt === attempt),
      ),
  );
}
