import type { TransportEvent } from './Transport.ts';

/**
 * Reports refused heartbeats (`heartbeat_refused`) at most once per key per `intervalMs`, however
 * often the heartbeats are read: a key that keeps an oversized or malformed value is one line per
 * interval, not one per read.
 *
 * @example
 * ```ts
 * const refusals = new HeartbeatRefusals(timing.heartbeatIntervalMs, (e) => hub.emit(e));
 * refusals.refuse('worker.w-1', 70_000, 'over the cap', clock.now());
 * ```
 */
export class HeartbeatRefusals {
  readonly #last = new Map<string, number>();

  constructor(
    private readonly intervalMs: number,
    private readonly report: (event: TransportEvent) => void,
  ) {}

  refuse(key: string, size: number, reason: string, now: number): void {
    const last = this.#last.get(key);
    if (last !== undefined && now - last < this.intervalMs) return;
    // Forget keys not refused within an interval, so the map follows the keys refused now.
    for (const [k, at] of this.#last) if (now - at >= this.intervalMs) this.#last.delete(k);
    this.#last.set(key, now);
    this.report({ type: 'heartbeat_refused', key, size, reason });
  }
}
