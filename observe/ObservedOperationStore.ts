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
  /** Kinds of the attempts this process started, for the completions that name only an id. */
  private readonly running = new Map<string, OperationKind>();

  constructor(
    database: Database,
    options: OperationStoreOptions & { readonly observer: RuntimeObserver },
  ) {
    super(database, options);
    this.observer = options.observer;
    this.observedClock = options.clock ?? systemClock;
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
      if (!r.ok || r.alreadyCompleted || item === undefined) return;
      const kind = this.running.get(r.id);
      this.running.delete(r.id);
      if (kind === undefined) return;
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
      if (!r.ok || item?.event === undefined || r.from === r.status) return;
      const event = item.event;
      if (event.type === 'START') this.running.set(r.id, r.context.kind);
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
