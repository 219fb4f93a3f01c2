import { z } from 'zod';
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

/** The default largest accepted payload, in bytes. A valid message is under 250 bytes. */
export const DEFAULT_MAX_MESSAGE_BYTES = 4096;

/** The result of decoding bytes from the wire. */
export type DecodeResult =
  | { readonly ok: true; readonly message: DispatchMessage }
  | { readonly ok: false; readonly reason: string };

const encoder = new TextEncoder();
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
  const parsed = dispatchMessageSchema.safeParse(message);
  if (!parsed.success) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `Invalid dispatch message: ${z.prettifyError(parsed.error)}`,
      { details: { message } },
    );
  }
  const { operationId, kind, operationType, attempt } = parsed.data;
  const bytes = encoder.encode(JSON.stringify({ operationId, kind, operationType, attempt }));
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
  const parsed = dispatchMessageSchema.safeParse(value);
  if (!parsed.success) {
    return { ok: false, reason: `wrong shape: ${z.prettifyError(parsed.error)}` };
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
