import { JetStreamApiError } from '@nats-io/jetstream';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';

/** The most replicas JetStream keeps of a stream. */
export const MAX_STREAM_REPLICAS = 5;

/**
 * How many copies the dispatch stream, its consumers and the heartbeat bucket keep, and whether
 * the operator chose it. An automatic count only ever raises an existing stream's; a chosen one
 * sets it either way.
 */
export interface StreamReplicas {
  readonly replicas: number;
  readonly chosen: boolean;
}

/** What a server tells a client about its cluster (`nc.info`). */
export interface AdvertisedCluster {
  readonly cluster?: string;
  readonly connect_urls?: readonly string[];
}

/**
 * The replica count: the one chosen (`OPSTATE_NATS_REPLICAS`, 1–5), else 3 when the server
 * says it is in a cluster that advertises three or more servers, else 1. A cluster that does not
 * advertise its servers (`no_advertise`) counts as one server: choose the count there.
 *
 * @example
 * ```ts
 * streamReplicas(undefined, nc.info); // { replicas: 3, chosen: false } on a three-node cluster
 * streamReplicas(0, {});              // throws CONFIG: replicas must be a whole number from 1 to 5
 * ```
 */
export function streamReplicas(
  chosen: number | undefined,
  server: AdvertisedCluster | undefined,
): StreamReplicas {
  if (chosen !== undefined) {
    if (!(Number.isSafeInteger(chosen) && chosen >= 1 && chosen <= MAX_STREAM_REPLICAS)) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `replicas must be a whole number from 1 to ${MAX_STREAM_REPLICAS}; got ${String(chosen)}.`,
      );
    }
    return { replicas: chosen, chosen: true };
  }
  const servers = new Set(server?.connect_urls ?? []).size;
  const clustered = server?.cluster !== undefined && server.cluster !== '';
  return { replicas: clustered && servers >= 3 ? 3 : 1, chosen: false };
}

/** The replica count an existing stream should move to, or undefined to leave it. */
export function replicasToApply(current: number, wanted: StreamReplicas): number | undefined {
  const now = Math.max(1, current);
  if (now === wanted.replicas) return undefined;
  if (!wanted.chosen && now > wanted.replicas) return undefined;
  return wanted.replicas;
}

/** JetStream's answers to a replica count the servers cannot hold. */
const CANNOT_HOLD = new Set([
  10005, // no suitable peers for placement
  10074, // replicas > 1 not supported in non-clustered mode
  10023, // insufficient resources
]);

/**
 * A refusal to place `replicas` copies of `stream`, as a `CONFIG` error saying what to change;
 * anything else is returned as it came.
 */
export function replicaRefusal(err: unknown, stream: string, replicas: number): unknown {
  if (!(err instanceof JetStreamApiError) || !CANNOT_HOLD.has(err.code)) return err;
  return new OpstateError(
    OpstateErrorCode.CONFIG,
    `NATS cannot keep ${replicas} replicas of ${stream}: ${err.message}. Set OPSTATE_NATS_REPLICAS to at most the number of JetStream servers in the cluster (1 on a single server).`,
    { details: { stream, replicas, errCode: err.code }, cause: err },
  );
}
