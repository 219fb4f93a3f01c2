import {
  AckPolicy,
  type ConsumerConfig,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  ReplayPolicy,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { dispatchSubjects, type Route } from '../../machines/routing.ts';
import type { TransportTiming } from '../Transport.ts';
import type { TransportNames } from '../TransportNames.ts';
import { replicasToApply, type StreamReplicas } from './streamReplicas.ts';

function isApiError(err: unknown, code: number): boolean {
  return err instanceof JetStreamApiError && err.code === code;
}

/**
 * The largest dispatch message the stream stores (64 KiB). A dispatch is a few hundred bytes and
 * the transport refuses one over `maxMessageBytes` (4 KiB by default, at most this) before it is
 * sent; the server refuses anything larger from any client.
 */
export const DISPATCH_MAX_MSG_BYTES = 64 * 1024;

/**
 * Default of the most bytes the dispatch stream holds (256 MiB: over a million dispatches). When
 * it is full, a publish is refused (`discard: new`) rather than an older dispatch dropped: the
 * relay's cursor stays before it and the relay publishes it once there is room.
 */
export const DEFAULT_DISPATCH_MAX_BYTES = 256 * 1024 * 1024;

/** The limits the dispatch stream is held to. */
export interface DispatchStreamLimits {
  readonly maxAckPending: number;
  /** Most bytes stored [`DEFAULT_DISPATCH_MAX_BYTES`]. */
  readonly maxBytes: number;
  /** Copies the stream and its consumers keep [one]. */
  readonly replicas?: StreamReplicas;
}

/**
 * The subjects the stream captures: each legacy route's subject and each frozen pair's site-route
 * subjects (`dispatchSubjects`), the ones consumers read.
 */
function routeSubjects(names: TransportNames): string[] {
  return dispatchSubjects(names.prefix).sort();
}

/**
 * Creates the work-queue dispatch stream and one durable pull consumer per route, or brings
 * existing ones in line with the configured timers and limits. The stream captures only the
 * routes' subjects, legacy and site routes of the frozen pairs (a publish to any other subject
 * under the prefix finds no stream); a site route's dispatches wait in the stream until a worker
 * of its site ensures its consumer, stores no
 * message over `DISPATCH_MAX_MSG_BYTES` and at most `maxBytes`, and refuses new messages when full
 * (`discard: new`) instead of dropping queued ones. An existing stream is updated to these
 * settings (JetStream allows each to change), its replica count raised to the one wanted (or
 * set to a chosen one; consumers keep the stream's count). Each consumer filters on its route's exact
 * subject, so filters never overlap (a work-queue stream refuses overlapping ones). Never sets a
 * consumer `BackOff`: on the server it replaces ack-wait, which must stay above the reconciler
 * floor. Errors are left to the caller to translate.
 *
 * @example
 * ```ts
 * await ensureDispatchStream(jsm, transportNames('opstate'), timing, allRoutes(),
 *   { maxAckPending: 1000, maxBytes: DEFAULT_DISPATCH_MAX_BYTES });
 * ```
 */
export async function ensureDispatchStream(
  jsm: JetStreamManager,
  names: TransportNames,
  timing: TransportTiming,
  routes: readonly Route[],
  limits: DispatchStreamLimits,
): Promise<void> {
  const { maxAckPending } = limits;
  const stream: Partial<StreamConfig> & { name: string } = {
    name: names.stream,
    subjects: routeSubjects(names),
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.New,
    max_msg_size: DISPATCH_MAX_MSG_BYTES,
    max_bytes: limits.maxBytes,
    duplicate_window: nanos(timing.duplicateWindowMs),
    num_replicas: limits.replicas?.replicas ?? 1,
  };
  try {
    const info = await jsm.streams.info(names.stream);
    const c = info.config;
    const replicas = replicasToApply(
      c.num_replicas,
      limits.replicas ?? { replicas: 1, chosen: false },
    );
    stream.num_replicas = replicas ?? c.num_replicas;
    if (
      replicas !== undefined ||
      c.duplicate_window !== stream.duplicate_window ||
      c.discard !== stream.discard ||
      c.max_msg_size !== stream.max_msg_size ||
      c.max_bytes !== stream.max_bytes ||
      [...c.subjects].sort().join(' ') !== stream.subjects?.join(' ')
    ) {
      await jsm.streams.update(names.stream, { ...c, ...stream });
    }
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    await jsm.streams.add(stream);
  }

  for (const route of routes) {
    const durable = names.consumer(route);
    const wanted: Partial<ConsumerConfig> = {
      durable_name: durable,
      filter_subject: names.subject(route),
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(timing.ackWaitMs),
      max_deliver: timing.maxDeliver,
      max_ack_pending: maxAckPending,
      deliver_policy: DeliverPolicy.All,
      replay_policy: ReplayPolicy.Instant,
    };
    try {
      const info = await jsm.consumers.info(names.stream, durable);
      const c = info.config;
      if (
        c.ack_wait !== wanted.ack_wait ||
        c.max_deliver !== wanted.max_deliver ||
        c.max_ack_pending !== wanted.max_ack_pending
      ) {
        await jsm.consumers.update(names.stream, durable, {
          ack_wait: wanted.ack_wait,
          max_deliver: wanted.max_deliver,
          max_ack_pending: wanted.max_ack_pending,
        });
      }
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
      await jsm.consumers.add(names.stream, wanted);
    }
    await removeAckedLeftovers(jsm, names, route);
  }
}

/**
 * After a broker crash, nats-server 2.9 may keep messages in the work-queue stream that its
 * consumer had already acked (the consumer's ack floor was persisted, the stream's removal was
 * not). They are never redelivered, but they pile up. Every message on the route's subject at or
 * below the consumer's ack floor is acked by definition, so it is purged.
 */
async function removeAckedLeftovers(
  jsm: JetStreamManager,
  names: TransportNames,
  route: Route,
): Promise<void> {
  const info = await jsm.consumers.info(names.stream, names.consumer(route));
  const floor = info.ack_floor.stream_seq;
  if (floor > 0) {
    await jsm.streams.purge(names.stream, { filter: names.subject(route), seq: floor + 1 });
  }
}
