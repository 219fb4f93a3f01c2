import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import type { TransportNames } from '../TransportNames.ts';
import { translateJetStreamError } from './translateJetStreamError.ts';

/**
 * The heartbeat bucket as an observer (the dashboard, `opstate status`) opens it: read, never
 * created or changed. One stream-info request (`$JS.API.STREAM.INFO.KV_<bucket>`) finds the
 * bucket and whether it answers direct gets; then the bucket is bound, with no create request.
 * A bucket that does not exist is refused with `TRANSPORT` (retryable: a control plane creates it
 * when it starts) naming that, and is looked for again at the next call, as is any failure.
 *
 * @example
 * ```ts
 * const openBucket = observedBucket(js, jsm, transportNames('opstate'));
 * const beat = await (await openBucket()).get('worker.w-1');
 * ```
 */
export function observedBucket(
  js: JetStreamClient,
  jsm: JetStreamManager,
  names: TransportNames,
): () => Promise<KV> {
  let bucket: Promise<KV> | undefined;
  const open = async (): Promise<KV> => {
    const stream = `KV_${names.heartbeatBucket}`;
    let allowDirect: boolean;
    try {
      allowDirect = (await jsm.streams.info(stream)).config.allow_direct === true;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) {
        throw missingBucket(names, err);
      }
      throw translateJetStreamError(err, 'heartbeat bucket info', { stream });
    }
    return new Kvm(js).open(names.heartbeatBucket, { allow_direct: allowDirect });
  };
  return () => {
    bucket ??= open().catch((err: unknown) => {
      bucket = undefined;
      throw err;
    });
    return bucket;
  };
}

/** The heartbeat bucket is not there: no control plane has run on this server yet. */
export function missingBucket(names: TransportNames, cause?: unknown): OpstateError {
  return new OpstateError(
    OpstateErrorCode.TRANSPORT,
    `the heartbeat bucket ${names.heartbeatBucket} does not exist on this NATS server: a control plane creates it (and the dispatch stream ${names.stream}) when it starts; start one with OPSTATE_PREFIX=${names.prefix}. This process only observes and creates nothing`,
    {
      details: { bucket: names.heartbeatBucket, stream: names.stream, missing: true },
      retryable: true,
      ...(cause === undefined ? {} : { cause }),
    },
  );
}

/**
 * What an observer refuses: anything that would create or change a stream, a consumer or the
 * bucket, publish a dispatch or write a heartbeat.
 */
export function observerRefusal(what: string): OpstateError {
  return new OpstateError(
    OpstateErrorCode.CONFIG,
    `this process observes NATS only (the transport's observer, the runtime's natsObserver: the dashboard and \`opstate status\`): it may not ${what}; a control plane creates the stream, its consumers and the heartbeat bucket, and publishes dispatches`,
    { details: { observer: true } },
  );
}
