import type { createInspector } from '@statelyai/inspect';
import { type Loop, startLoop } from '../loops/Loop.ts';
import type { Clock } from '../machines/Clock.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import { OperationStatus, operationMachine } from '../machines/operationMachine.ts';
import {
  type ReplayedSnapshot,
  type ReplayStep,
  replayTransitions,
} from '../machines/replayTransitions.ts';
import type { Logger } from '../observe/Logger.ts';
import { TransitionCursor } from '../observe/TransitionCursor.ts';
import type { Executor } from '../persistence/openDatabase.ts';
import {
  type OperationTransitionRow,
  selectHistories,
  selectLatestTransitionId,
  selectTransitionsAfter,
} from '../persistence/reads/selectTransitions.ts';

/** The part of an `@statelyai/inspect` inspector that inspection from stored rows uses. */
export type StatelyInspector = Pick<
  ReturnType<typeof createInspector>,
  'actor' | 'event' | 'snapshot'
>;

/** An operation as the inspector names it: its id is the actor's session id. */
export interface InspectedOperation {
  readonly id: string;
  readonly kind: OperationKind;
  readonly maxRetries: number;
}

/**
 * Sends replayed steps of one operation to a Stately inspector: with `register`, first the actor
 * registration (session id = the operation id, the lifecycle machine's definition, the snapshot
 * of its first step), then for every step one event inspection event (its source is who sent it:
 * a worker id, `scheduler`, `heartbeat_monitor`, `deadline`, `reconciler`, `broker`, `operator`…) and one
 * snapshot inspection event. `senders` remembers which senders were already registered as actors
 * of their own, so the inspector can draw them as the events' sources.
 *
 * @example
 * ```ts
 * const steps = replayTransitions(op, history);
 * sendOperationSteps(inspector, op, steps, { register: true, senders: new Set() });
 * ```
 */
export function sendOperationSteps(
  inspector: StatelyInspector,
  operation: InspectedOperation,
  steps: readonly ReplayStep[],
  options: { readonly register: boolean; readonly senders: Set<string> },
): void {
  const first = steps[0];
  if (options.register) {
    // The inspector reads the definition from `logic.config`: the lifecycle machine's own.
    const actorRef = {
      sessionId: operation.id,
      id: operation.id,
      logic: operationMachine,
      send() {},
      getSnapshot: () => first?.snapshot,
    };
    inspector.actor(actorRef, first?.snapshot ?? { status: 'active' });
  }
  for (const step of steps) {
    const by = step.transition.by;
    if (!options.senders.has(by)) {
      options.senders.add(by);
      inspector.actor(by, { status: 'active' });
    }
    inspector.event(operation.id, step.event, { source: by });
    inspector.snapshot(operation.id, step.snapshot, { event: step.event });
  }
}

/**
 * Replays one operation's whole stored history to a Stately inspector (`opstate inspect <id>
 * --stately`). Returns the steps sent.
 *
 * @example
 * ```ts
 * await replayOperation(database, inspector, id);
 * ```
 */
export async function replayOperation(
  database: Executor,
  inspector: StatelyInspector,
  operationId: string,
): Promise<ReplayStep[]> {
  const history = await selectHistories(database, [operationId]);
  const first = history[0];
  if (first === undefined) return [];
  const operation = { id: operationId, kind: first.kind, maxRetries: first.maxRetries };
  const steps = replayTransitions(operation, history);
  sendOperationSteps(inspector, operation, steps, { register: true, senders: new Set() });
  return steps;
}

export interface InspectionStreamOptions {
  readonly database: Executor;
  readonly inspector: StatelyInspector;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How often to look for new transitions when idle (default 500 ms). */
  readonly intervalMs?: number;
  /** Transition rows read per pass at most (default 1000). */
  readonly batchSize?: number;
  /** Operations whose last snapshot is kept to continue their replay (default 50,000). */
  readonly maxTracked?: number;
}

interface Tracked {
  readonly lastId: number;
  readonly snapshot: ReplayedSnapshot;
}

/**
 * Streams every operation's new transitions to a Stately inspector as they are committed
 * (`opstate control-plane --inspect`, `opstate demo --inspect`). It follows `operation_transition`
 * from the newest row at start with a cursor that also waits for ids committed out of order. An
 * operation it has not shown yet is registered and replayed from its creation; one it has shown
 * continues from the snapshot it last sent (kept for at most `maxTracked` operations, the least
 * recently moved forgotten first; a forgotten one is replayed whole on its next move). Read-only:
 * it runs on any process, leader or not. `drain()` stops it and sends what was committed by then
 * (call it before closing the database).
 *
 * @example
 * ```ts
 * const stream = startInspectionStream({ database, inspector, clock, logger });
 * await stream.stop();
 * ```
 */
export function startInspectionStream(
  options: InspectionStreamOptions,
): Loop & { /** Stops, then sends what has been committed by now. */ drain(): Promise<void> } {
  const { database, inspector } = options;
  const batchSize = options.batchSize ?? 1_000;
  const maxTracked = options.maxTracked ?? 50_000;
  const cursor = new TransitionCursor();
  const tracked = new Map<string, Tracked>();
  const senders = new Set<string>();

  const remember = (id: string, t: Tracked | undefined) => {
    tracked.delete(id);
    if (t === undefined || t.snapshot.value === OperationStatus.COMPLETED) return;
    tracked.set(id, t);
    for (const oldest of tracked.keys()) {
      if (tracked.size <= maxTracked) break;
      tracked.delete(oldest);
    }
  };

  const pass = async () => {
    if (!cursor.started) cursor.start(await selectLatestTransitionId(database));
    const now = options.clock.now();
    const rows = await selectTransitionsAfter(database, cursor.after, cursor.gaps(now), batchSize);
    const byOperation = new Map<string, OperationTransitionRow[]>();
    for (const r of rows) {
      const list = byOperation.get(r.operationId) ?? [];
      list.push(r);
      byOperation.set(r.operationId, list);
    }
    // Operations seen for the first time in the middle of their history: replay it from the start.
    const unseen = [...byOperation]
      .filter(([id, list]) => !tracked.has(id) && list[0]?.from !== null)
      .map(([id]) => id);
    const upTo = rows.reduce((m, r) => Math.max(m, r.id), 0);
    const histories = new Map<string, OperationTransitionRow[]>();
    for (const r of await selectHistories(database, unseen, upTo)) {
      const list = histories.get(r.operationId) ?? [];
      list.push(r);
      histories.set(r.operationId, list);
    }
    for (const [id, list] of byOperation) {
      const first = list[0] as OperationTransitionRow;
      const operation = { id, kind: first.kind, maxRetries: first.maxRetries };
      const known = tracked.get(id);
      const fresh = known === undefined ? (histories.get(id) ?? list) : list;
      const rowsToSend = fresh.filter((r) => known === undefined || r.id > known.lastId);
      if (rowsToSend.length === 0) continue;
      const steps = replayTransitions(operation, rowsToSend, known?.snapshot);
      sendOperationSteps(inspector, operation, steps, { register: known === undefined, senders });
      const last = steps.at(-1);
      if (last !== undefined) {
        remember(id, { lastId: last.transition.id, snapshot: last.snapshot });
      }
    }
    cursor.advance(
      rows.map((r) => r.id),
      now,
    );
    return rows.length >= batchSize;
  };

  const loop = startLoop({
    name: 'inspection stream',
    intervalMs: options.intervalMs ?? 500,
    clock: options.clock,
    logger: options.logger,
    pass,
  });
  return {
    ...loop,
    async drain() {
      await loop.stop();
      while (await pass()) {}
    },
  };
}
