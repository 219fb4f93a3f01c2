import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { systemClock } from '../../machines/Clock.ts';
import type { OperationKind } from '../../machines/OperationKind.ts';
import {
  encodeHeld,
  holdsAlive,
  MAX_HEARTBEAT_BYTES,
  type ReadHeartbeat,
  readWorkerHeartbeat,
  workerHeartbeatKey,
} from '../HeartbeatKey.ts';
import { HeartbeatRefusals } from '../HeartbeatRefusals.ts';
import { claimRaced, refuseClaim } from '../refuseClaim.ts';
import type {
  Heartbeats,
  HeldOperation,
  TransportEvent,
  TransportTiming,
  WorkerHeartbeat,
  WorkerReads,
} from '../Transport.ts';
import { translateJetStreamError } from './translateJetStreamError.ts';

const isWrongLastSequence = (err: unknown) =>
  err instanceof JetStreamApiError &&
  (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
    err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);

/**
 * Worker heartbeats in a JetStream KV bucket (history 1, `max_age` = `heartbeatMaxAgeMs`, values
 * capped near `MAX_HEARTBEAT_BYTES`), one key per worker. nats-server 2.9 has no per-key TTL, so
 * age is judged from the entry's `created` time, stamped by the server: writers' clocks do not
 * matter, only the reader's against the server's. Reading costs one stream-info request (its
 * subjects are the keys: no consumer to set up or tear down) plus one read per worker, whatever
 * the number of operations. A value over the cap or not a heartbeat is refused and reported
 * (`heartbeat_refused`, once per key per heartbeat interval).
 *
 * @example
 * ```ts
 * const hb = new JetStreamHeartbeats(() => kvPromise, timing, listWorkerKeys, (e) => hub.emit(e));
 * await hb.claim('w-1', instance);
 * await hb.beat('w-1', [{ kind, operationId: 'op1', attempt: 1 }], instance);
 * ```
 */
export class JetStreamHeartbeats implements Heartbeats {
  readonly #refusals: HeartbeatRefusals;

  constructor(
    private readonly bucket: () => Promise<KV>,
    private readonly timing: TransportTiming,
    /** The keys stored under `worker.` (from the bucket stream's subjects, no consumer). */
    private readonly workerKeys: () => Promise<string[]>,
    report: (event: TransportEvent) => void = () => {},
  ) {
    this.#refusals = new HeartbeatRefusals(timing.heartbeatIntervalMs, report);
  }

  async beat(
    workerId: string,
    held: readonly HeldOperation[],
    instance?: string,
    reads?: WorkerReads,
  ): Promise<void> {
    const k = workerHeartbeatKey(workerId);
    const value = encodeHeld(held, instance, reads);
    try {
      await (await this.bucket()).put(k, value);
    } catch (err) {
      throw translateJetStreamError(err, 'heartbeat put', { key: k });
    }
  }

  async claim(workerId: string, instance: string, reads?: WorkerReads): Promise<void> {
    const k = workerHeartbeatKey(workerId);
    const value = encodeHeld([], instance, reads);
    try {
      const kv = await this.bucket();
      // Compare-and-set on the key's revision: of two processes claiming at once, one wins.
      const entry = await kv.get(k);
      const stored = entry?.operation === 'PUT' ? this.#read(k, entry) : undefined;
      const refusal = refuseClaim({
        workerId,
        instance,
        stored,
        now: systemClock.now(),
        timeoutMs: this.timing.heartbeatTimeoutMs,
      });
      if (refusal) throw refusal;
      if (entry === null) await kv.create(k, value);
      else await kv.update(k, value, entry.revision);
    } catch (err) {
      if (isWrongLastSequence(err)) {
        throw claimRaced(workerId);
      }
      throw translateJetStreamError(err, 'heartbeat claim', { key: k });
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
        const beat = this.#read(entry.key, entry);
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
    whose: { readonly exceptWorkerId?: string; readonly holder?: string } = {},
  ): Promise<boolean> {
    const beats = (await this.list()).filter((b) => b.workerId !== whose.exceptWorkerId);
    return holdsAlive(
      beats,
      // The server stamped the entries: judge them by real time whatever the runtime's clock.
      systemClock.now(),
      this.timing.heartbeatTimeoutMs,
      kind,
      operationId,
      attempt,
      whose.holder,
    );
  }

  /** One stored entry as a heartbeat, or undefined (refused, and reported once per interval). */
  #read(
    key: string,
    entry: { readonly value: Uint8Array; readonly created: Date; string(): string },
  ): WorkerHeartbeat | undefined {
    // Judged on the bytes before any is decoded: an oversized value is never parsed.
    const read: ReadHeartbeat =
      entry.value.length > MAX_HEARTBEAT_BYTES
        ? {
            ok: false,
            reason: `the value takes ${entry.value.length} bytes, over the ${MAX_HEARTBEAT_BYTES}-byte cap`,
          }
        : readWorkerHeartbeat(key, entry.string(), entry.created.getTime());
    if (read.ok) return read.beat;
    this.#refusals.refuse(key, entry.value.length, read.reason, systemClock.now());
    return undefined;
  }
}
