import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationType, Route } from '../machines/routing.ts';
import type { DeliverySlots } from './DeliverySlots.ts';

/**
 * The dispatch/heartbeat contract. Two implementations honour it with the same
 * semantics: JetStream (`createJetStreamTransport`) and in-process (`createInProcessTransport`).
 * Interfaces only: the wire schema lives in `DispatchMessage.ts`, the timer rules in
 * `TransportTiming.ts`.
 */

/**
 * What travels on a routing queue: just enough to find the operation and fence a stale attempt.
 * Validated at the edge (both on publish and on receive); a message that fails validation never
 * reaches a handler.
 */
export interface DispatchMessage {
  /** The operation's id; also the first half of the dedup id `<operationId>:<attempt>`. */
  readonly operationId: string;
  /** Identity axis. */
  readonly kind: OperationKind;
  /** Routing axis (the queue also depends on the route's location type). */
  readonly operationType: OperationType;
  /** The fencing epoch: a positive integer, bumped on every return to PENDING. */
  readonly attempt: number;
}

/** A dispatch stored in its queue that the queue has not handed out yet (`Transport.waiting`). */
export interface WaitingDispatch {
  readonly message: DispatchMessage;
  /** The queue it waits in: `queueName` of its route. */
  readonly queue: string;
}

/** What `Transport.waiting` found, and whether it read every queue to the end it needed. */
export interface WaitingDispatches {
  readonly found: readonly WaitingDispatch[];
  /** False when the read stopped at `WAITING_MAX_READS` before every wanted one was found. */
  readonly complete: boolean;
}

/**
 * The most stored messages `Transport.waiting` reads in one call: a queue thousands deep behind
 * busy slots costs one read per message ahead of the ones asked about.
 */
export const WAITING_MAX_READS = 20_000;

/**
 * One delivery of a dispatch message to a handler. Settle it exactly once with `ack`, `nak` or
 * `term`; `working` may be called any number of times before that. Calls after settlement are
 * ignored (a second `ack` of the same delivery resolves without effect).
 */
export interface Delivery {
  readonly message: DispatchMessage;
  /** The route (queue) it was consumed from. */
  readonly route: Route;
  /** 1 on first delivery, 2 on the first redelivery, … */
  readonly deliveryCount: number;
  /**
   * Done: the message leaves the queue. By default resolves once the broker has read the ack
   * (a connection flush shared by all acks in flight); with `confirmAcks: true` once JetStream has
   * confirmed it (one request per ack, about half the throughput). Rejects with `OpstateError`
   * `TRANSPORT` (retryable) when the broker is unreachable: the delivery is then unsettled again
   * and may be acked again; if it never is, it comes back after ack-wait. Acking the same attempt
   * again (on this or a later delivery) is harmless.
   */
  ack(): Promise<void>;
  /** Not now: redeliver after `delayMs` (default 0). Retry backoff belongs in the database. */
  nak(delayMs?: number): void;
  /** Still working: restarts the ack-wait timer. Call at the heartbeat interval. */
  working(): void;
  /** Never again: the message is removed and not redelivered (a fenced, stale attempt). */
  term(): void;
}

/**
 * Timers, validated at start in the order
 * `heartbeatIntervalMs < heartbeatTimeoutMs < reconcilerFloorMs < ackWaitMs`.
 */
export interface TransportTiming {
  /** How often a worker writes its heartbeat and calls `working()` [30 s]. */
  readonly heartbeatIntervalMs: number;
  /** A heartbeat older than this is stale: the task is not alive [300 s]. */
  readonly heartbeatTimeoutMs: number;
  /** The reconciler's minimum age before it resets an operation with no live task [3600 s]. */
  readonly reconcilerFloorMs: number;
  /** The broker redelivers a held, unsettled message after this long [4200 s]. */
  readonly ackWaitMs: number;
  /** Deliveries before a message is given up (see the `max_deliveries` event) [10]. */
  readonly maxDeliver: number;
  /** A second publish of the same `<operationId>:<attempt>` within this window is dropped [120 s]. */
  readonly duplicateWindowMs: number;
  /** Heartbeat keys are dropped by the store after this age; must exceed the timeout [2 × timeout]. */
  readonly heartbeatMaxAgeMs: number;
}

/** The outcome of one publish. `duplicate`: the same attempt was already published in the window. */
export interface PublishResult {
  readonly duplicate: boolean;
}

/** One entry of a batched publish; results come back in the same order. */
export interface PublishItem {
  readonly route: Route;
  readonly message: DispatchMessage;
}

/** Per-item outcome of `publishMany`: an error on one item never fails the others. */
export type PublishManyResult =
  | { readonly ok: true; readonly duplicate: boolean }
  | { readonly ok: false; readonly error: Error };

/** Options of `consume`. */
export interface ConsumeOptions {
  /**
   * Most deliveries held unsettled at once by this subscription (≥ 1); nothing is prefetched
   * beyond it. A slot frees when its delivery is settled, so a handler still awaiting its ack's
   * flush no longer counts.
   */
  readonly concurrency: number;
  /**
   * A bound shared with other subscriptions (a worker's queues): deliveries held and messages
   * asked for across all of them stay within `slots.size`, and queues take turns when slots are
   * fewer than queues. Default: slots of this subscription's own, `concurrency` of them.
   */
  readonly slots?: DeliverySlots;
}

/** A running consumer of one routing queue. */
export interface Subscription {
  readonly route: Route;
  /** Handlers running now (may briefly exceed `concurrency` while acks are flushed). */
  readonly inFlight: number;
  /**
   * Stops pulling, waits for running handlers to finish, and returns anything received but not
   * started to the queue at once (nak, no delay). Idempotent.
   */
  stop(): Promise<void>;
  /** Resolves when the subscription has stopped (by `stop()` or by `Transport.close()`). */
  readonly closed: Promise<void>;
}

/**
 * Handles one delivery. It should settle the delivery before its promise resolves; if it rejects
 * or leaves the delivery unsettled, the transport naks it after `handlerErrorNakDelayMs` and
 * reports a `handler_error` event.
 */
export type DeliveryHandler = (delivery: Delivery) => Promise<void>;

/** An operation a worker holds at one attempt: pulled and about to start, or running. */
export interface HeldOperation {
  readonly kind: OperationKind;
  /** Key-safe: letters, digits, `-`, `_`, `=` (no dots). */
  readonly operationId: string;
  readonly attempt: number;
}

/**
 * What a worker reads, written in each of its beats: the queues it pulls from and the kinds it has
 * handlers for. A worker that reads a queue serves it, idle or not.
 */
export interface WorkerReads {
  /** The names of the queues it consumes (`queueName` of each route), each once. */
  readonly queues: readonly string[];
  /** The kinds it runs, each once. */
  readonly kinds: readonly OperationKind[];
}

/**
 * A worker's heartbeat as stored: when it last beat (ms since epoch, store clock), what it held and
 * what it reads.
 */
export interface WorkerHeartbeat {
  /** Key-safe like an operation id. */
  readonly workerId: string;
  /**
   * The writing process's nonce, random per start: two processes given the same worker id write
   * different ones (`Heartbeats.claim` refuses the second). Absent in a heartbeat written without.
   */
  readonly instance?: string;
  readonly at: number;
  readonly held: readonly HeldOperation[];
  /**
   * The queues and kinds it reads. Absent in a heartbeat written without (by an older worker):
   * which queues it reads is then unknown, and only what it holds tells.
   */
  readonly reads?: WorkerReads;
}

/**
 * Heartbeat store (a KV bucket in JetStream): one key per worker process, rewritten at every
 * heartbeat interval with every operation the worker holds — those it has pulled and not yet
 * started as well as those running — so one write covers them all, and the control plane finds a
 * dispatch that sits with a stalled or dead worker.
 */
export interface Heartbeats {
  /**
   * Writes (or refreshes) a worker's heartbeat, listing what it holds now and what it reads,
   * stamped with the process's `instance` nonce. Throws `BAD_INPUT` when the value would exceed
   * `MAX_HEARTBEAT_BYTES` (list `heldThatFits` of them), or when `reads` names a queue or kind
   * that does not exist, or one twice.
   */
  beat(
    workerId: string,
    held: readonly HeldOperation[],
    instance?: string,
    reads?: WorkerReads,
  ): Promise<void>;
  /**
   * Takes a worker id for one process instance before its first beat, and writes that first beat
   * (holding nothing, reading `reads`). Throws `CONFIG` naming the id when a fresh heartbeat (younger than
   * `heartbeatTimeoutMs`) of another instance holds it: two live processes with one id would
   * each vouch for what the other started. A stale one, or one of the same instance, is taken
   * over. Two instances claiming at once: one wins, the other is refused.
   */
  claim(workerId: string, instance: string, reads?: WorkerReads): Promise<void>;
  /** Removes a worker's heartbeat (it stopped). Removing a missing one is harmless. */
  remove(workerId: string): Promise<void>;
  /** Every worker heartbeat still stored, fresh or stale (stale ones vanish after `heartbeatMaxAgeMs`). */
  list(): Promise<WorkerHeartbeat[]>;
  /**
   * Does a worker whose heartbeat is younger than `heartbeatTimeoutMs` hold this operation (at
   * `attempt`, when given)? `exceptWorkerId` leaves that worker's own heartbeat out (a worker
   * asking about a delivery it lists itself); `holder` counts only that worker's heartbeat (the
   * worker a START recorded: another worker listing a running operation does not keep it alive).
   */
  isAlive(
    kind: OperationKind,
    operationId: string,
    attempt?: number,
    whose?: { readonly exceptWorkerId?: string; readonly holder?: string },
  ): Promise<boolean>;
}

/** Notifications from the transport, tagged by `type`. */
export type TransportEvent =
  /** A message failed validation (bad JSON, wrong shape, oversized); it was terminated. */
  | {
      readonly type: 'rejected';
      readonly route: Route;
      /** The subject it arrived on. */
      readonly subject: string;
      readonly reason: string;
      readonly size: number;
      /** The first bytes of the payload, printable (`previewPayload`), never the whole of it. */
      readonly preview: string;
    }
  /** A message used up `maxDeliver`; it was removed from the queue. */
  | {
      readonly type: 'max_deliveries';
      readonly route: Route;
      readonly subject: string;
      /** The message, when it could still be read and parsed. */
      readonly message: DispatchMessage | undefined;
      readonly deliveries: number;
    }
  /** A handler rejected or returned without settling its delivery; it was nak()ed. */
  | {
      readonly type: 'handler_error';
      readonly route: Route;
      readonly message: DispatchMessage;
      readonly error: unknown;
      /** When it is delivered again: the nak delay, doubled per failed delivery up to a cap. */
      readonly retryInMs: number;
    }
  /**
   * A stored heartbeat was refused: over `MAX_HEARTBEAT_BYTES`, or not a heartbeat at all. It
   * counts for nothing (its worker looks dead to the control plane). Emitted at most once per key
   * per heartbeat interval, however often the heartbeats are read.
   */
  | {
      readonly type: 'heartbeat_refused';
      /** The key, `worker.<id>`. */
      readonly key: string;
      readonly size: number;
      readonly reason: string;
    }
  /**
   * A queue's stream or consumer does not exist yet (a worker started before the control plane
   * created them); it retries with backoff. Emitted once per subscription until a pull works.
   */
  | {
      readonly type: 'waiting_for_control_plane';
      readonly route: Route;
      readonly missing: 'stream' | 'consumer';
      /** The stream's or the consumer's name. */
      readonly name: string;
    }
  /** Pulling from a queue failed (broker down, consumer missing); the consumer retries on its own. */
  | { readonly type: 'consume_error'; readonly route: Route; readonly error: unknown }
  /** The connection to the broker dropped or came back (JetStream only). */
  | { readonly type: 'disconnected' | 'reconnected' };

/** Running totals, for metrics and tests. */
export interface TransportStats {
  readonly published: number;
  readonly duplicates: number;
  readonly rejected: number;
  readonly maxDeliveries: number;
  readonly handlerErrors: number;
}

/** The transport contract. */
export interface Transport {
  /** The validated timers this transport runs with. */
  readonly timing: TransportTiming;
  /** Creates (or checks) the stream, one consumer per route, and the heartbeat bucket. Idempotent. */
  ensure(routes: readonly Route[]): Promise<void>;
  /**
   * Publishes one dispatch with dedup id `<operationId>:<attempt>`. Rejects with `BAD_INPUT` for
   * an invalid message and with retryable `TRANSPORT` when the broker does not confirm.
   */
  publish(route: Route, message: DispatchMessage): Promise<PublishResult>;
  /** Publishes many at once (pipelined, not one awaited publish at a time), for the scheduler and the dispatch relay. */
  publishMany(items: readonly PublishItem[]): Promise<PublishManyResult[]>;
  /** Consumes a routing queue. Two subscriptions on one queue never hold the same message. */
  consume(route: Route, options: ConsumeOptions, handler: DeliveryHandler): Subscription;
  /** Heartbeat store. */
  readonly heartbeats: Heartbeats;
  /**
   * Dispatches the broker has handed out and not seen settled since (acked or terminated): held
   * by a live worker, waiting to be redelivered, or stranded with a worker that died or froze
   * before it read them. One read per queue with such messages; the heartbeat monitor asks only
   * when a SCHEDULED operation has been held by no live worker for longer than the timeout.
   */
  unsettled(): Promise<DispatchMessage[]>;
  /**
   * Of the dispatches `wanted` (operation id → attempt), those still stored in their queue and
   * not yet handed out by it: waiting for a free slot of a worker that reads the queue, not lost.
   * Each comes with the name of the queue it waits in (`queueName` of its route). A queue is read
   * from the first message it has not handed out, and reading stops once every wanted dispatch
   * is found or after `WAITING_MAX_READS` messages in all (`complete` is then false: what was not
   * reached is not reported). The reconciler asks before it resets a SCHEDULED operation.
   */
  waiting(wanted: ReadonlyMap<string, number>): Promise<WaitingDispatches>;
  /** Subscribes to notifications; returns the unsubscribe function. */
  onEvent(listener: (event: TransportEvent) => void): () => void;
  /** Running totals. */
  stats(): TransportStats;
  /** Subscriptions not yet stopped (leak checks). */
  readonly openSubscriptions: number;
  /** Stops every subscription (as `stop()` does) and releases the connection. Idempotent. */
  close(): Promise<void>;
}

/** Options shared by both factories. Every field has a default. */
export interface TransportOptions {
  /** Timer overrides; the result is validated (`OpstateError` `CONFIG` names the values). */
  readonly timing?: Partial<TransportTiming>;
  /** Larger dispatch payloads are refused on publish and terminated on receive [4096]. */
  readonly maxMessageBytes?: number;
  /**
   * Delay of the nak after a handler error or an unsettled delivery [1000 ms], doubled for each
   * earlier delivery of the same message up to `handlerErrorNakMaxDelayMs` [60000 ms], so a
   * lasting failure spends `maxDeliver` over minutes (about four with the defaults), not seconds.
   */
  readonly handlerErrorNakDelayMs?: number;
  /** The longest nak delay after handler errors [60000 ms]; see `handlerErrorNakDelayMs`. */
  readonly handlerErrorNakMaxDelayMs?: number;
  /** `ack()` waits for JetStream's confirmation instead of a connection flush [false]. */
  readonly confirmAcks?: boolean;
}
