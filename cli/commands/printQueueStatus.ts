import type { QueueReaders } from '../../machines/queueReaders.ts';
import {
  allRoutes,
  OPERATION_TYPES_IN_USE,
  queueName,
  type RoutedLocation,
  routesAt,
} from '../../machines/routing.ts';
import type { QueueDepth } from '../../persistence/reads/selectQueueDepths.ts';
import type { Io } from '../Command.ts';

/** A routing queue in `opstate status --json`. */
export interface QueueStatus {
  /** `<site>_<location>_<location type>_<operation type>`, or a legacy `<location type>_<operation type>`. */
  readonly queue: string;
  /** SCHEDULED: dispatched, not started. */
  readonly waiting: number;
  readonly inProgress: number;
  /** When the longest-waiting dispatch was scheduled, ISO; null when none waits. */
  readonly oldestWaiting: string | null;
  /** Live workers whose heartbeat says they read it; null when heartbeats are not visible here. */
  readonly readers: readonly string[] | null;
}

/** The queues of `opstate status`, and the live workers that do not say which queues they read. */
export interface QueuesStatus {
  /**
   * Every legacy queue, every registered location's site queue, and every other one with work or
   * a reader, by name.
   */
  readonly queues: readonly QueueStatus[];
  /** Live workers whose heartbeat does not say which queues they read (older workers). */
  readonly readersUnknown: readonly string[];
}

/**
 * Each queue's depth and its live readers, from the live work per queue and the heartbeats
 * (`readers` null: not visible from here).
 *
 * @example
 * ```ts
 * queuesStatus(await selectQueueDepths(database, []), queueReaders(beats, now, timeoutMs),
 *   await selectLocationsAt(database));
 * ```
 */
export function queuesStatus(
  depths: readonly QueueDepth[],
  readers: QueueReaders | null,
  locations: readonly RoutedLocation[] = [],
): QueuesStatus {
  const byQueue = new Map(depths.map((d) => [queueName(d.route), d]));
  const names = [
    ...new Set([
      ...allRoutes().map(queueName),
      ...routesAt(locations, OPERATION_TYPES_IN_USE).map(queueName),
      ...byQueue.keys(),
      ...(readers?.byQueue.keys() ?? []),
    ]),
  ].sort();
  return {
    queues: names.map((queue) => {
      const depth = byQueue.get(queue);
      return {
        queue,
        waiting: depth?.waiting ?? 0,
        inProgress: depth?.inProgress ?? 0,
        oldestWaiting: depth?.oldestWaiting?.toISOString() ?? null,
        readers: readers === null ? null : (readers.byQueue.get(queue) ?? []),
      };
    }),
    readersUnknown: readers?.unknown ?? [],
  };
}

/**
 * Prints the queue section of `opstate status`: one line per queue with work or a live reader
 * (waiting, in progress, who reads it); the quiet ones are counted on one line.
 *
 * @example
 * ```ts
 * printQueueStatus(queuesStatus(depths, readers), io);
 * ```
 */
export function printQueueStatus(s: QueuesStatus, io: Io): void {
  const visible = s.queues.every((q) => q.readers !== null);
  const unread = visible ? ', no live worker reading' : '';
  const busy = s.queues.filter(
    (q) => q.waiting > 0 || q.inProgress > 0 || (q.readers?.length ?? 0) > 0,
  );
  io.out('');
  const header = ['queue', 'waiting', 'in progress', 'live workers reading it'];
  const width = Math.max(header[0]?.length ?? 0, ...busy.map((q) => q.queue.length));
  io.out(
    busy.length === 0
      ? `queues: nothing waiting or in progress${unread}${visible ? ' any' : ''}`
      : [header[0]?.padEnd(width), header[1], header[2], header[3]].join('  '),
  );
  for (const q of busy) {
    const who =
      q.readers === null
        ? 'not visible here'
        : q.readers.length === 0
          ? 'none'
          : q.readers.join(', ');
    io.out(
      [
        q.queue.padEnd(width),
        String(q.waiting).padStart('waiting'.length),
        String(q.inProgress).padStart('in progress'.length),
        who,
      ].join('  '),
    );
  }
  const quiet = s.queues.length - busy.length;
  if (busy.length > 0 && quiet > 0) {
    io.out(
      `  (${quiet} other queues: nothing waiting or in progress${unread}${visible ? ' them' : ''})`,
    );
  }
  if (s.readersUnknown.length > 0) {
    const one = s.readersUnknown.length === 1;
    io.out(
      `  (${s.readersUnknown.join(', ')}: live, of an older version: ${one ? 'its heartbeat does' : 'their heartbeats do'} not say which queues ${one ? 'it reads' : 'they read'})`,
    );
  }
}
