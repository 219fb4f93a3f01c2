import type { OperationKind } from '../../machines/OperationKind.ts';
import { heartbeatKeyString, operationHeartbeatPrefix } from '../HeartbeatKey.ts';
import type { Heartbeat, HeartbeatKey, Heartbeats, TransportTiming } from '../Transport.ts';
import type { Clock } from './Clock.ts';

/**
 * Heartbeats in a map, with the KV bucket's rules: a key older than `heartbeatMaxAgeMs` is
 * dropped, a key younger than `heartbeatTimeoutMs` is alive.
 *
 * @example
 * ```ts
 * const hb = new InProcessHeartbeats(realClock, timing);
 * await hb.put({ kind, operationId: 'op1', taskId: 't1' });
 * await hb.isAlive(kind, 'op1'); // true
 * ```
 */
export class InProcessHeartbeats implements Heartbeats {
  readonly #entries = new Map<string, Heartbeat>();

  constructor(
    private readonly clock: Clock,
    private readonly timing: TransportTiming,
  ) {}

  async put(key: HeartbeatKey): Promise<void> {
    const k = heartbeatKeyString(key);
    this.#entries.set(k, {
      key: { kind: key.kind, operationId: key.operationId, taskId: key.taskId },
      at: this.clock.now(),
    });
  }

  async delete(key: HeartbeatKey): Promise<void> {
    this.#entries.delete(heartbeatKeyString(key));
  }

  async list(): Promise<Heartbeat[]> {
    this.#prune();
    return [...this.#entries.values()];
  }

  async isAlive(kind: OperationKind, operationId: string): Promise<boolean> {
    const prefix = operationHeartbeatPrefix(kind, operationId);
    const now = this.clock.now();
    for (const [k, heartbeat] of this.#entries) {
      if (k.startsWith(prefix) && now - heartbeat.at < this.timing.heartbeatTimeoutMs) {
        return true;
      }
    }
    return false;
  }

  #prune(): void {
    const now = this.clock.now();
    for (const [k, heartbeat] of this.#entries) {
      if (now - heartbeat.at >= this.timing.heartbeatMaxAgeMs) this.#entries.delete(k);
    }
  }
}
