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
import type { Route } from '../../machines/routing.ts';
import type { TransportTiming } from '../Transport.ts';
import type { TransportNames } from '../TransportNames.ts';

function isApiError(err: unknown, code: number): boolean {
  return err instanceof JetStreamApiError && err.code === code;
}

/**
 * Creates the work-queue dispatch stream and one durable pull consumer per route, or brings
 * existing ones in line with the configured timers. Each consumer filters on its route's exact
 * subject, so filters never overlap (a work-queue stream refuses overlapping ones). Never sets a
 * consumer `BackOff`: on the server it replaces ack-wait, which must stay above the reconciler
 * floor. Errors are left to the caller to translate.
 *
 * @example
 * ```ts
 * await ensureDispatchStream(jsm, transportNames('opstate'), timing, allRoutes(), 1000);
 * ```
 */
export async function ensureDispatchStream(
  jsm: JetStreamManager,
  names: TransportNames,
  timing: TransportTiming,
  routes: readonly Route[],
  maxAckPending: number,
): Promise<void> {
  const stream: Partial<StreamConfig> & { name: string } = {
    name: names.stream,
    subjects: [names.streamSubjects],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    duplicate_window: nanos(timing.duplicateWindowMs),
  };
  try {
    const info = await jsm.streams.info(names.stream);
    if (info.config.duplicate_window !== stream.duplicate_window) {
      await jsm.streams.update(names.stream, { ...info.config, ...stream });
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
