import type { OperationKind } from '../machines/OperationKind.ts';
import { isRecoveryPath } from '../machines/recoveryPaths.ts';
import type { Logger } from './Logger.ts';

/** One committed lifecycle transition, as the store reports it. */
export interface ObservedTransition {
  readonly operationId: string;
  readonly kind: OperationKind;
  readonly event: string;
  readonly from: string;
  readonly to: string;
  /** Who caused it: a worker id, `scheduler`, a recovery path (`RECOVERY_PATHS`), `operator`. */
  readonly by: string;
  /** The attempt after the transition (a RESET starts a new one). */
  readonly attempt: number;
  /** When it was committed (ms since the epoch, the runtime's clock). */
  readonly at: number;
  /** START only: when the operation was SCHEDULED, for dispatch → start latency. */
  readonly scheduledAt?: number;
}

/** The recovery paths: who may RESET an operation without an operator. */
export { RECOVERY_PATHS } from '../machines/recoveryPaths.ts';

/**
 * What the runtime tells the outside about its work: logs and metrics hang on it. The store calls
 * it after each commit; it must not throw or block.
 */
export interface RuntimeObserver {
  transitions(items: readonly ObservedTransition[]): void;
}

/**
 * Several observers as one.
 *
 * @example
 * ```ts
 * const observer = composeObservers(loggingObserver(logger), metrics.observer);
 * ```
 */
export function composeObservers(...observers: (RuntimeObserver | undefined)[]): RuntimeObserver {
  const all = observers.filter((o): o is RuntimeObserver => o !== undefined);
  return {
    transitions(items) {
      if (items.length === 0) return;
      for (const o of all) o.transitions(items);
    },
  };
}

/**
 * A log line per transition at DEBUG, and per recovery (a RESET by a recovery path: the heartbeat
 * monitor, the deadline, the reconciler or the broker) at WARNING, each with the operation id, kind, attempt and path.
 *
 * @example
 * ```ts
 * new ObservedOperationStore(database, { observer: loggingObserver(logger) });
 * ```
 */
export function loggingObserver(logger: Logger): RuntimeObserver {
  return {
    transitions(items) {
      for (const t of items) {
        const fields = {
          operationId: t.operationId,
          kind: t.kind,
          attempt: t.attempt,
          event: t.event,
          from: t.from,
          to: t.to,
          by: t.by,
        };
        if (t.event === 'RESET' && isRecoveryPath(t.by)) {
          logger.log('WARNING', 'operation recovered', { ...fields, path: t.by });
        } else {
          logger.log('DEBUG', 'operation transition', fields);
        }
      }
    },
  };
}
