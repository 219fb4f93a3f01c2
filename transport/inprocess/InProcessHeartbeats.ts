import type { Clock } from '../../machines/Clock.ts';
import type { OperationKind } from '../../machines/OperationKind.ts';
import {
  encodeHeld,
  holdsAlive,
  parseWorkerHeartbeat,
  workerHeartbeatKey,
} from '../HeartbeatKey.ts';
import { refuseClaim } from '../refuseClaim.ts';
import type {
  Heartbeats,
  HeldOperation,
  TransportTiming,
  WorkerHeartbeat,
  WorkerReads,
} from '../Transport.ts';

/**
 * Worker heartbeats in a map, with the KV bucket's rules: a key older than `heartbeatMaxAgeMs` is
 * dropped, a heartbeat younger than `heartbeatTimeoutMs` is alive. Values go through the same
 * encoding as on the wire, so both transports refuse and accept the same input, and claims follow
 * the same rule (`refuseClaim`).
 *
 * @example
 * ```ts
 * const hb = new InProcessHeartbeats(systemClock, timing);
 * await hb.beat('w-1', [{ kind, operationId: 'op1', attempt: 1 }]);
 * await hb.isAlive(kind, 'op1'); // true
 * ```
 */
export class InProcessHeartbeats implements Heartbeats {
  readonly #entries = new Map<string, WorkerHeartbeat>();

  constructor(
    private readonly clock: Clock,
    private readonly timing: TransportTiming,
  ) {}

  async beat(
    workerId: string,
    held: readonly HeldOperation[],
    instance?: string,
    reads?: WorkerReads,
  ): Promise<void> {
    const key = workerHeartbeatKey(workerId);
    const beat = parseWorkerHeartbeat(key, encodeHeld(held, instance, reads), this.clock.now());
    if (beat) this.#entries.set(key, beat);
  }

  async claim(workerId: string, instance: string, reads?: WorkerReads): Promise<void> {
    const stored = this.#entries.get(workerHeartbeatKey(workerId));
    const refusal = refuseClaim({
      workerId,
      instance,
      stored,
      now: this.clock.now(),
      timeoutMs: this.timing.heartbeatTimeoutMs,
    });
    if (refusal) throw refusal;
    await this.beat(workerId, [], instance, reads);
  }

  async remove(workerId: string): Promise<void> {
    this.#entries.delete(workerHeartbeatKey(workerId));
  }

  async list(): Promise<WorkerHeartbeat[]> {
    const now = this.clock.now();
    for (const [k, beat] of this.#entries) {
      if (now - beat.at >= this.timing.heartbeatMaxAgeMs) this.#entries.delete(k);
    }
    return [...this.#entries.values()];
  }

  async isAlive(
    kind: OperationKind,
    operationId: string,
    attempt?: number,
    whose: { readonly exceptWorkerId?: string; readonly holder?: string } = {},
  ): Promise<boolean> {
    return holdsAlive(
      (await this.list()).filter((b) => b.workerId !== whose.exceptWorkerId),
      this.clock.now(),
      this.timing.heartbeatTimeoutMs,
      kind,
      operationId,
      attempt,
      whose.holder,
    );
  }
}
