import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../DispatchMessage.ts';
import { DEFAULT_DISPATCH_MAX_BYTES, DISPATCH_MAX_MSG_BYTES } from './ensureDispatchStream.ts';

/** The JetStream transport's sizes and waits, defaulted and checked. */
export interface JetStreamLimits {
  readonly pullExpiresMs: number;
  readonly maxMessageBytes: number;
  readonly maxStreamBytes: number;
  readonly publishWindow: number;
  readonly maxAckPending: number;
  readonly requestTimeoutMs: number;
}

/**
 * The transport's limits from its options, each defaulted; a value out of range is refused with
 * `OpstateError` `CONFIG` naming it and what it may be.
 *
 * @example
 * ```ts
 * jetStreamLimits({ pullExpiresMs: 500 }); // throws CONFIG: pullExpiresMs must be ≥ 1000; got 500.
 * ```
 */
export function jetStreamLimits(options: {
  readonly pullExpiresMs?: number;
  readonly maxMessageBytes?: number;
  readonly maxStreamBytes?: number;
  readonly publishWindow?: number;
  readonly maxAckPending?: number;
  readonly requestTimeoutMs?: number;
}): JetStreamLimits {
  const pullExpiresMs = options.pullExpiresMs ?? 5000;
  if (!(pullExpiresMs >= 1000)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `pullExpiresMs must be ≥ 1000; got ${pullExpiresMs}.`,
    );
  }
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  if (
    !(
      Number.isSafeInteger(maxMessageBytes) &&
      maxMessageBytes > 0 &&
      maxMessageBytes <= DISPATCH_MAX_MSG_BYTES
    )
  ) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `maxMessageBytes must be a whole number from 1 to ${DISPATCH_MAX_MSG_BYTES} (the dispatch stream's max_msg_size); got ${maxMessageBytes}.`,
    );
  }
  const maxStreamBytes = options.maxStreamBytes ?? DEFAULT_DISPATCH_MAX_BYTES;
  if (!(Number.isSafeInteger(maxStreamBytes) && maxStreamBytes >= 1024 * 1024)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `maxStreamBytes must be a whole number of bytes, at least 1 MiB (1048576); got ${maxStreamBytes}.`,
    );
  }
  const maxAckPending = options.maxAckPending ?? 1000;
  if (!(Number.isSafeInteger(maxAckPending) && maxAckPending >= 1 && maxAckPending <= 1_000_000)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `maxAckPending (a queue's dispatches handed out and not yet settled) must be a whole number from 1 to 1000000; got ${maxAckPending}.`,
    );
  }
  return {
    pullExpiresMs,
    maxMessageBytes,
    maxStreamBytes,
    publishWindow: Math.max(1, options.publishWindow ?? 1000),
    maxAckPending,
    requestTimeoutMs: options.requestTimeoutMs ?? 5000,
  };
}
