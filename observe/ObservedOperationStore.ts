import { OPERATOR, type SystemActor, WORKER } from '../machines/actors.ts';
import { type Clock, systemClock } from '../machines/Clock.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationEvent } from '../machines/operationMachine.ts';
import type { ApplyItem, ApplyResult } from '../persistence/applyEvents.ts';
import type { ClaimOptions, ClaimResult } from '../persistence/claimDue.ts';
import type { CompleteItem, CompleteResult } from '../persistence/completeWithOutputs.ts';
import type { LeaseFence } from '../persistence/LeaseFence.ts';
import type { OperationRecord } from '../persistence/OperationRecord.ts';
import { OperationStore, type OperationStoreOptions } from '../persistence/OperationStore.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { ObservedTransition, RuntimeObserver } from './RuntimeObserver.ts';

/** How many started attempts an observed store remembers by default: far above any worker's concurrency. */
const DEFAULT_MAX_TRACKED = 10_000;

/** Who a transition row names when the caller gave no `by` (as the store writes it). */
function defaultBy(event: OperationEvent): string {
  switch (event.type) {
    case 'START':
      return event.workerId;
    case 'RESET':
      return event.by;
    case 'SCHEDULE':
      return 'scheduler' satisfies SystemActor;
    default:
      return OPERATOR;
  }
}

/**
 * The operation store, telling an observer about every transition it commits (after the commit,
 * never inside it). The runtime uses it so logs and metrics need nothing from the actors.
 *
 * @example
 * ```ts
 * const store = new ObservedOperationStore(database, { observer: loggingObserver(logger) });
 * ```
 */
export class ObservedOperationStore extends OperationStore {
  private readonly observer: RuntimeObserver;
  private readonly observedClock: Clock;
  /**
   * Kinds of the attempts this process started, for the completions that name only an id. An
   * entry goes when this process writes anything else for the operation, applied or refused (a
   * completion refused because the operation was reset away from this worker included), and the
   * oldest goes once `maxTracked` are kept: a worker that never writes again for an attempt (its
   * handler hangs, it stops) leaves at most that many behind.
   */
  private readonly running = new Map<string, OperationKind>();
  private readonly maxTracked: number;

  constructor(
    database: Database,
    options: OperationStoreOptions & {
      readonly observer: RuntimeObserver;
      /** How many started attempts it remembers at most (default 10,000). */
      readonly maxTracked?: number;
    },
  ) {
    super(database, options);
    this.observer = options.observer;
    this.observedClock = options.clock ?? systemClock;
    this.maxTracked = options.maxTracked ?? DEFAULT_MAX_TRACKED;
  }

  /** How many started attempts it remembers now (never more than `maxTracked`). */
  get trackedAttempts(): number {
    return this.running.size;
  }

  private track(id: string, kind: OperationKind): void {
    this.running.delete(id); // re-inserted as the newest
    this.running.set(id, kind);
    if (this.running.size <= this.maxTracked) return;
    const oldest = this.running.keys().next().value;
    if (oldest !== undefined) this.running.delete(oldest);
  }

  // Every override passes the leadership fence on: a control plane's writes stay refused once its
  // epoch lost the lease, observed or not.
  override async applyMany(
    items: readonly ApplyItem[],
    fence?: LeaseFence,
  ): Promise<ApplyResult[]> {
    const results = await super.applyMany(items, fence);
    this.report(results, (n) => ({ event: items[n]?.event, by: items[n]?.by }));
    return results;
  }

  override async applyManyTo(
    items: readonly { record: OperationRecord; event: OperationEvent; by?: string }[],
  ): Promise<ApplyResult[]> {
    const results = await super.applyManyTo(items);
    this.report(results, (n) => items[n]);
    return results;
  }

  override async claimDue(
    limit: number,
    fence?: LeaseFence,
    options?: ClaimOptions,
  ): Promise<ClaimResult> {
    const result = await super.claimDue(limit, fence, options);
    const at = this.observedClock.now();
    this.observer.transitions(
      result.claimed.map((c) => ({
        operationId: c.id,
        kind: c.kind,
        event: 'SCHEDULE',
        from: 'PENDING',
        to: 'SCHEDULED',
        by: 'scheduler' satisfies SystemActor,
        attempt: c.attempt,
        at,
      })),
    );
    return result;
  }

  override async completeMany(items: readonly CompleteItem[]): Promise<CompleteResult[]> {
    const results = await super.completeMany(items);
    const at = this.observedClock.now();
    const observed: ObservedTransition[] = [];
    results.forEach((r, n) => {
      const item = items[n];
      const kind = this.running.get(r.id);
      // Completed or refused (reset away from this worker meanwhile), this attempt is over here.
      this.running.delete(r.id);
      if (!r.ok || r.alreadyCompleted || item === undefined || kind === undefined) return;
      observed.push({
        operationId: r.id,
        kind,
        event: 'COMPLETE',
        from: 'IN_PROGRESS',
        to: 'COMPLETED',
        by: item.by ?? WORKER,
        attempt: item.attempt,
        at,
      });
    });
    this.observer.transitions(observed);
    return results;
  }

  private report(
    results: readonly ApplyResult[],
    itemOf: (
      n: number,
    ) =>
      | { event?: OperationEvent | undefined; by?: string | undefined; record?: OperationRecord }
      | undefined,
  ): void {
    const at = this.observedClock.now();
    const observed: ObservedTransition[] = [];
    results.forEach((r, n) => {
      const item = itemOf(n);
      // A worker's FAIL refused (its attempt was reset away meanwhile) ends the attempt here; a
      // control plane's refused write (a lost race) says nothing about what this process runs.
      if (!r.ok && item?.event?.type === 'FAIL') {
        this.running.delete(r.id);
      }
      if (!r.ok || item?.event === undefined || r.from === r.status) return;
      const event = item.event;
      if (event.type === 'START') this.track(r.id, r.context.kind);
      else if (r.status !== 'IN_PROGRESS') this.running.delete(r.id);
      const scheduledAt = item.record?.scheduledAt?.getTime();
      observed.push({
        operationId: r.id,
        kind: r.context.kind,
        event: event.type,
        from: r.from,
        to: r.status,
        by: item.by ?? defaultBy(event),
        attempt: r.context.attempt,
        at,
        ...(event.type === 'START' && scheduledAt !== undefined ? { scheduledAt } : {}),
      });
    });
    this.observer.transitions(observed);
  }
}
