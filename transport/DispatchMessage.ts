import { z } from 'zod';
import { describeValue } from '../machines/describeValue.ts';
import { OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { OperationType } from '../machines/routing.ts';
import type { DispatchMessage } from './Transport.ts';

/**
 * The wire form of a dispatch message (JSON, UTF-8), kept apart from the API type. Unknown fields
 * are stripped rather than refused, so a newer producer never gets its dispatches terminated by an
 * older consumer.
 */
export const dispatchMessageSchema = z.object({
  operationId: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[A-Za-z0-9_=-]+$/, 'letters, digits, "-", "_" or "=" only'),
  kind: z.enum(OperationKind),
  operationType: z.enum(OperationType),
  attempt: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
});

const OPERATION_ID = /^[A-Za-z0-9_=-]+$/;
const KINDS: ReadonlySet<unknown> = new Set(Object.values(OperationKind));
const OPERATION_TYPES: ReadonlySet<unknown> = new Set(Object.values(OperationType));

/**
 * The same test as `dispatchMessageSchema`, written out for the hot path (every publish and every
 * delivery): a well-formed message comes back stripped to its four fields without building the
 * schema's parse state, which cost more than the rest of decoding. It accepts only what the
 * schema accepts; anything else (undefined) goes through the schema, whose error names the field.
 */
function wellFormed(value: unknown): DispatchMessage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return undefined;
  const { operationId, kind, operationType, attempt } = value as Record<string, unknown>;
  if (
    typeof operationId === 'string' &&
    operationId.length >= 1 &&
    operationId.length <= 128 &&
    OPERATION_ID.test(operationId) &&
    KINDS.has(kind) &&
    OPERATION_TYPES.has(operationType) &&
    typeof attempt === 'number' &&
    Number.isSafeInteger(attempt) &&
    attempt >= 1
  ) {
    return { operationId, kind, operationType, attempt } as DispatchMessage;
  }
  return undefined;
}

const FIELDS = 'operationId, kind, operationType, attempt';

/**
 * What is wrong with a message `wellFormed` refused, in words (never the schema's own text): each
 * field named with what it allows and what it got.
 */
function problemsOf(value: unknown): string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return `a dispatch message is a JSON object { ${FIELDS} }; got ${describeValue(value)}`;
  }
  const { operationId, kind, operationType, attempt } = value as Record<string, unknown>;
  const problems: string[] = [];
  const wrong = (field: string, v: unknown, allowed: string) =>
    problems.push(
      v === undefined
        ? `${field} is required`
        : `${field} must be ${allowed}; got ${describeValue(v)}`,
    );
  if (
    !(
      typeof operationId === 'string' &&
      operationId.length >= 1 &&
      operationId.length <= 128 &&
      OPERATION_ID.test(operationId)
    )
  ) {
    wrong('operationId', operationId, '1 to 128 letters, digits, "-", "_" or "="');
  }
  if (!KINDS.has(kind)) wrong('kind', kind, `one of ${[...KINDS].join(', ')}`);
  if (!OPERATION_TYPES.has(operationType)) {
    wrong('operationType', operationType, `one of ${[...OPERATION_TYPES].join(', ')}`);
  }
  if (!(typeof attempt === 'number' && Number.isSafeInteger(attempt) && attempt >= 1)) {
    wrong('attempt', attempt, 'a whole number ≥ 1');
  }
  return problems.join('; ');
}

/** The default largest accepted payload, in bytes. A valid message is under 250 bytes. */
export const DEFAULT_MAX_MESSAGE_BYTES = 4096;

/** The result of decoding bytes from the wire. */
export type DecodeResult =
  | { readonly ok: true; readonly message: DispatchMessage }
  | { readonly ok: false; readonly reason: string };

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * The dedup id of a dispatch, `<operationId>:<attempt>` (sent as `Nats-Msg-Id`).
 *
 * @example
 * ```ts
 * dispatchMsgId({ operationId: 'op1', kind, operationType, attempt: 2 }); // 'op1:2'
 * ```
 */
export function dispatchMsgId(message: DispatchMessage): string {
  return `${message.operationId}:${message.attempt}`;
}

/**
 * Validates a message and encodes it for the wire; throws `OpstateError` `BAD_INPUT` naming the
 * faulty field when it is invalid or larger than `maxBytes`.
 *
 * @example
 * ```ts
 * const bytes = encodeDispatch({ operationId: 'op1', kind: OperationKind.TRANSFER,
 *   operationType: OperationType.DATA_TRANSFER, attempt: 1 });
 * ```
 */
export function encodeDispatch(
  message: DispatchMessage,
  maxBytes = DEFAULT_MAX_MESSAGE_BYTES,
): Uint8Array {
  let checked = wellFormed(message);
  if (checked === undefined) {
    const parsed = dispatchMessageSchema.safeParse(message);
    if (!parsed.success) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `Invalid dispatch message: ${problemsOf(message)}`,
        { details: { message } },
      );
    }
    checked = parsed.data;
  }
  const { operationId, kind, operationType, attempt } = checked;
  // Buffer.from: a quarter of TextEncoder.encode's cost for a string this short (it slices a
  // shared pool instead of allocating), and a Buffer is the Uint8Array publish() takes.
  const bytes = Buffer.from(JSON.stringify({ operationId, kind, operationType, attempt }), 'utf8');
  if (bytes.length > maxBytes) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `Dispatch message is ${bytes.length} bytes, above the ${maxBytes}-byte limit; shorten the operation id.`,
      { details: { size: bytes.length, maxBytes } },
    );
  }
  return bytes;
}

/**
 * Decodes and validates bytes received from the wire. Never throws: a bad payload (oversized,
 * not UTF-8, not JSON, wrong shape) comes back as `{ ok: false, reason }`.
 *
 * @example
 * ```ts
 * const r = decodeDispatch(msg.data);
 * if (!r.ok) { msg.term(); report(r.reason); }
 * ```
 */
export function decodeDispatch(
  bytes: Uint8Array,
  maxBytes = DEFAULT_MAX_MESSAGE_BYTES,
): DecodeResult {
  if (bytes.length > maxBytes) {
    return { ok: false, reason: `oversized: ${bytes.length} bytes > ${maxBytes}` };
  }
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(bytes));
  } catch (err) {
    return { ok: false, reason: `not JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
  const fast = wellFormed(value);
  if (fast !== undefined) return { ok: true, message: Object.freeze(fast) };
  const parsed = dispatchMessageSchema.safeParse(value);
  if (!parsed.success) {
    return { ok: false, reason: `wrong shape: ${problemsOf(value)}` };
  }
  return { ok: true, message: Object.freeze(parsed.data) };
}

/** How many payload bytes a log line may show of a message it reports. */
export const PREVIEW_BYTES = 48;

/**
 * A short, printable prefix of a payload for a log line: at most `PREVIEW_BYTES` bytes, control
 * and non-ASCII bytes as `\xNN`, and `…` when cut.
 *
 * @example
 * ```ts
 * previewPayload(new TextEncoder().encode('{"operationId":')); // '{"operationId":'
 * ```
 */
export function previewPayload(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes.subarray(0, PREVIEW_BYTES)) {
    out += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`;
  }
  return bytes.length > PREVIEW_BYTES ? `${out}…` : out;
}
