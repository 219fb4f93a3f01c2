import type { JetStreamManager } from '@nats-io/jetstream';
import { MAX_HEARTBEAT_BYTES } from '../HeartbeatKey.ts';

/**
 * The heartbeat bucket's `max_msg_size`: a little over `MAX_HEARTBEAT_BYTES`, so a worker's own
 * check (it never writes more than the cap) is what bites first, and the server refuses anything
 * larger from anyone else.
 */
export const HEARTBEAT_BUCKET_MAX_VALUE_BYTES = MAX_HEARTBEAT_BYTES + 1024;

/**
 * Brings a heartbeat bucket made before the cap (or with another) in line with it: the bucket's
 * stream is updated in place (JetStream allows `max_msg_size` to change).
 *
 * @example
 * ```ts
 * await capHeartbeatValues(jsm, 'KV_opstate_heartbeats');
 * ```
 */
export async function capHeartbeatValues(jsm: JetStreamManager, stream: string): Promise<void> {
  const info = await jsm.streams.info(stream);
  if (info.config.max_msg_size !== HEARTBEAT_BUCKET_MAX_VALUE_BYTES) {
    await jsm.streams.update(stream, {
      ...info.config,
      max_msg_size: HEARTBEAT_BUCKET_MAX_VALUE_BYTES,
    });
  }
}
