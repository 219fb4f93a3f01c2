import type { JetStreamManager } from '@nats-io/jetstream';
import { MAX_HEARTBEAT_BYTES } from '../HeartbeatKey.ts';
import { replicasToApply, type StreamReplicas } from './streamReplicas.ts';

/**
 * The heartbeat bucket's `max_msg_size`: a little over `MAX_HEARTBEAT_BYTES`, so a worker's own
 * check (it never writes more than the cap) is what bites first, and the server refuses anything
 * larger from anyone else.
 */
export const HEARTBEAT_BUCKET_MAX_VALUE_BYTES = MAX_HEARTBEAT_BYTES + 1024;

/**
 * Brings a heartbeat bucket made before the cap (or with another) in line with it, and with the
 * replica count wanted: the bucket's stream is updated in place (JetStream allows `max_msg_size`
 * and `num_replicas` to change).
 *
 * @example
 * ```ts
 * await capHeartbeatValues(jsm, 'KV_opstate_heartbeats', { replicas: 3, chosen: false });
 * ```
 */
export async function capHeartbeatValues(
  jsm: JetStreamManager,
  stream: string,
  wanted: StreamReplicas = { replicas: 1, chosen: false },
): Promise<void> {
  const info = await jsm.streams.info(stream);
  const replicas = replicasToApply(info.config.num_replicas, wanted);
  if (info.config.max_msg_size !== HEARTBEAT_BUCKET_MAX_VALUE_BYTES || replicas !== undefined) {
    await jsm.streams.update(stream, {
      ...info.config,
      max_msg_size: HEARTBEAT_BUCKET_MAX_VALUE_BYTES,
      num_replicas: replicas ?? info.config.num_replicas,
    });
  }
}
