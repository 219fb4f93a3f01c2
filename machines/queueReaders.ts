/**
 * A worker heartbeat as the queue rule reads it: whose, when, and which queues its worker reads,
 * when it says (a heartbeat of an older worker does not).
 */
export interface ReadingBeat {
  readonly workerId: string;
  /** When it beat (ms). */
  readonly at: number;
  readonly reads?: { readonly queues: readonly string[] };
}

/** Who reads each queue, by the heartbeats younger than the timeout. */
export interface QueueReaders {
  /** Per queue name, the live workers whose heartbeat names it, sorted. */
  readonly byQueue: ReadonlyMap<string, readonly string[]>;
  /**
   * Live workers whose heartbeat does not say which queues they read (an older worker), sorted:
   * while there is one, an idle worker may serve a queue nobody is seen to read.
   */
  readonly unknown: readonly string[];
}

/**
 * Folds the heartbeats into who reads each queue: only those younger than `timeoutMs` at `now`
 * count (a stale heartbeat's worker serves nothing).
 *
 * @example
 * ```ts
 * const readers = queueReaders(await heartbeats.list(), clock.now(), timing.heartbeatTimeoutMs);
 * readers.byQueue.get('source_data_transfer'); // ['worker-a', 'worker-b']
 * ```
 */
export function queueReaders(
  beats: readonly ReadingBeat[],
  now: number,
  timeoutMs: number,
): QueueReaders {
  const byQueue = new Map<string, string[]>();
  const unknown = new Set<string>();
  for (const beat of beats) {
    if (now - beat.at >= timeoutMs) continue;
    if (beat.reads === undefined) {
      unknown.add(beat.workerId);
      continue;
    }
    for (const queue of beat.reads.queues) {
      const list = byQueue.get(queue) ?? [];
      if (!list.includes(beat.workerId)) list.push(beat.workerId);
      byQueue.set(queue, list);
    }
  }
  for (const list of byQueue.values()) list.sort();
  return { byQueue, unknown: [...unknown].sort() };
}

/**
 * What the queue rule knows of one queue's readers (`AttentionQueueRow.readers` and
 * `readersKnown`): with no readers at all (heartbeats not read), none are known.
 *
 * @example
 * ```ts
 * const row = { ...depth, ...readersOf(readers, queueName(depth.route)) };
 * ```
 */
export function readersOf(
  readers: QueueReaders | null,
  queue: string,
): { readonly readers: readonly string[]; readonly readersKnown: boolean } {
  if (readers === null) return { readers: [], readersKnown: false };
  return { readers: readers.byQueue.get(queue) ?? [], readersKnown: readers.unknown.length === 0 };
}
