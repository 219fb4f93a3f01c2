import type { KV } from '@nats-io/kv';
import type { OperationKind } from '../../machines/OperationKind.ts';
import {
  heartbeatKeyString,
  operationHeartbeatPrefix,
  parseHeartbeatKey,
} from '../HeartbeatKey.ts';
import type { Heartbeat, HeartbeatKey, Heartbeats, TransportTiming } from '../Transport.ts';
import { translateJetStreamError } from './translateJetStreamError.ts';

/**
 * Heartbeats in a JetStream KV bucket (history 1, `max_age` = `heartbeatMaxAgeMs`). nats-server
 * 2.9 has no per-key TTL, so age is judged from the entry's `created` time, stamped by the
 * server: writers' clocks do not matter, only the reader's against the server's.
 *
 * `isAlive` lists the operation's keys and reads each (a few round trips); a loop asking about
 * many operations should call `list()` once instead.
 *
 * @example
 * ```ts
 * const hb = new JetStreamHeartbeats(() => kvPromise, timing);
 * await hb.put({ kind, operationId: 'op1', taskId: 't1' });
 * ```
 */
export class JetStreamHeartbeats implements Heartbeats {
  constructor(
    private readonly bucket: () => Promise<KV>,
    private readonly timing: TransportTiming,
  ) {}

  async put(key: HeartbeatKey): Promise<void> {
    const k = heartbeatKeyString(key);
    try {
      await (await this.bucket()).put(k, JSON.stringify({ at: Date.now() }));
    } catch (err) {
      throw translateJetStreamError(err, 'heartbeat put', { key: k });
    }
  }

  async delete(key: HeartbeatKey): Promise<void> {
    const k = heartbeatKeyString(key);
    try {
      await (await this.bucket()).delete(k);
    } catch (err) {
      throw translateJetStreamError(err, 'heartbeat delete', { key: k });
    }
  }

  list(): Promise<Heartbeat[]> {
    return this.#read('>');
  }

  async isAlive(kind: OperationKind, operationId: string): Promise<boolean> {
    const heartbeats = await this.#read(`${operationHeartbeatPrefix(kind, operationId)}*`);
    const now = Date.now();
    return heartbeats.some((h) => now - h.at < this.timing.heartbeatTimeoutMs);
  }

  async #read(filter: string): Promise<Heartbeat[]> {
    try {
      const kv = await this.bucket();
      const keys: string[] = [];
      for await (const k of await kv.keys(filter)) keys.push(k);
      const entries = await Promise.all(keys.map((k) => kv.get(k)));
      const heartbeats: Heartbeat[] = [];
      for (const entry of entries) {
        if (entry?.operation !== 'PUT') continue;
        const key = parseHeartbeatKey(entry.key);
        if (key) heartbeats.push({ key, at: entry.created.getTime() });
      }
      return heartbeats;
    } catch (err) {
      throw translateJetStreamError(err, 'heartbeat read', { filter });
    }
  }
}
