import type { KV } from '@nats-io/kv';
import { systemClock } from '../../machines/Clock.ts';
import type { OperationKind } from '../../machines/OperationKind.ts';
import {
  encodeHeld,
  holdsAlive,
  parseWorkerHeartbeat,
  workerHeartbeatKey,
} from '../HeartbeatKey.ts';
import type { Heartbeats, HeldOperation, TransportTiming, WorkerHeartbeat } from '../Transport.ts';
import { translateJetStreamError } from './translateJetStreamError.ts';

/**
 * Worker heartbeats in a JetStream KV bucket (history 1, `max_age` = `heartbeatMaxAgeMs`), one
 * key per worker. nats-server 2.9 has no per-key TTL, so age is judged from the entry's `created`
 * time, stamped by the server: writers' clocks do not matter, only the reader's against the
 * server's. Reading costs one stream-info request (its subjects are the keys: no consumer to set
 * up or tear down) plus one read per worker, whatever the number of operations.
 *
 * @example
 * ```ts
 * const hb = new JetStreamHeartbeats(() => kvPromise, timing, listWorkerKeys);
 * await hb.beat('w-1', [{ kind, operationId: 'op1', attempt: 1 }]);
 * ```
 */
export class JetStreamHeartbeats implements Heartbeats {
  constructor(
    private readonly bucket: () => Promise<KV>,
    private readonly timing: TransportTiming,
    /** The keys stored under `worker.` (from the bucket stream's subjects, no consumer). */
    private readonly workerKeys: () => Promise<string[]>,
  ) {}

  async beat(workerId: string, held: readonly HeldOperation[]): Promise<void> {
    const k = workerHeartbeatKey(workerId);
    const value = encodeHeld(held);
    try {
      await (await this.bucket()).put(k, value);
    } catch (err) {
      throw translateJetStreamError(err, 'heartbeat put', { key: k });
    }
  }

  async remove(workerId: string): Promise<void> {
    const k = workerHeartbeatKey(workerId);
    try {
      await (await this.bucket()).delete(k);
    } catch (err) {
      throw translateJetStreamError(err, 'heartbeat delete', { key: k });
    }
  }

  async list(): Promise<WorkerHeartbeat[]> {
    try {
      const kv = await this.bucket();
      const keys = await this.workerKeys();
      const entries = await Promise.all(keys.map((k) => kv.get(k)));
      const beats: WorkerHeartbeat[] = [];
      for (const entry of entries) {
        if (entry?.operation !== 'PUT') continue;
        const beat = parseWorkerHeartbeat(entry.key, entry.string(), entry.created.getTime());
        if (beat) beats.push(beat);
      }
      return beats;
    } catch (err) {
      throw translateJetStreamError(err, 'heartbeat read', {});
    }
  }

  async isAlive(
    kind: OperationKind,
    operationId: string,
    attempt?: number,
    exceptWorkerId?: string,
  ): Promise<boolean> {
    const beats = (await this.list()).filter((b) => b.workerId !== exceptWorkerId);
    return holdsAlive(
      beats,
      // The server stamped the entries: judge them by real time whatever the runtime's clock.
      systemClock.now(),
      this.timing.heartbeatTimeoutMs,
      kind,
      operationId,
      attempt,
    );
  }
}
