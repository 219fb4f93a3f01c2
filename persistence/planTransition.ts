import { OPERATOR, type SystemActor, WORKER } from '../machines/actors.ts';
import { type Decision, decide } from '../machines/decide.ts';
import {
  type OperationEvent,
  type OperationStatus,
  OperationStatus as S,
} from '../machines/operationMachine.ts';
import { queueName } from '../machines/routing.ts';
import { upgradeSnapshot } from '../machines/snapshotEnvelope.ts';
import { isoText } from './isoText.ts';
import type { OperationRecord } from './OperationRecord.ts';

/**
 * One row of the multi-row compare-and-set write (`sql/writeTransitions.ts`): the new snapshot,
 * the columns projected from it, the transition row, the breadcrumb of a `recordFailure` effect,
 * and the dispatch of a `dispatch` effect (its queue and message: the SCHEDULE transition is its
 * durable record, and the statement takes the relay's lock for it). Field names are the recordset
 * columns.
 */
export interface TransitionWrite {
  id: string;
  expected_version: number;
  status: OperationStatus;
  attempt: number;
  retry_count: number;
  snapshot: unknown;
  not_before: string | null;
  last_error: unknown;
  worker_id: string | null;
  scheduled_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  t_from: OperationStatus;
  t_event: string;
  t_attempt: number;
  t_by: string;
  t_reason: string | null;
  t_at: string;
  ob_attempt: number | null;
  ob_queue: string | null;
  ob_operation_type: string | null;
  ob_location_type: string | null;
  ob_payload: unknown;
  fe_kind: string | null;
  fe_attempt: number | null;
  fe_error: unknown;
}

export interface PlannedTransition {
  readonly write: TransitionWrite;
  readonly decision: Decision;
}

/** Who the transition row names when the caller does not say. */
function defaultBy(record: OperationRecord, event: OperationEvent): string {
  switch (event.type) {
    case 'START':
      return event.workerId;
    case 'COMPLETE':
    case 'FAIL':
      return record.workerId ?? WORKER;
    case 'RESET':
      return event.by;
    case 'SCHEDULE':
      return 'scheduler' satisfies SystemActor;
    case 'RETRY':
    case 'CANCEL':
      return OPERATOR;
  }
}

function reasonOf(event: OperationEvent): string | null {
  switch (event.type) {
    case 'RESET':
    case 'CANCEL':
      return event.reason;
    case 'RETRY':
      return event.reason ?? null;
    case 'FAIL':
      return event.error.message;
    default:
      return null;
  }
}

const iso = (d: Date | null): string | null => (d === null ? null : isoText(d));

/**
 * Runs the pure machine step for a loaded row and turns it into the row write. Throws what
 * `decide` throws (`INVALID_EVENT`, `STALE_ATTEMPT`, `BAD_INPUT`) and `SNAPSHOT_VERSION` for a
 * snapshot this build cannot restore; nothing has been written then.
 *
 * @example
 * ```ts
 * const { write, decision } = planTransition(record, { type: 'SCHEDULE' }, new Date(clock.now()));
 * ```
 */
export function planTransition(
  record: OperationRecord,
  event: OperationEvent,
  now: Date,
  by?: string,
): PlannedTransition {
  const snapshot = upgradeSnapshot({ ...record.envelope, snapshot: record.snapshot });
  const at = event.at ?? isoText(now);
  const timed = { ...event, at } as OperationEvent;
  const decision = decide(snapshot, timed);
  const c = decision.context;
  const to = decision.status;

  let scheduledAt = iso(record.scheduledAt);
  let startedAt = iso(record.startedAt);
  let finishedAt = iso(record.finishedAt);
  if (to === S.PENDING) {
    scheduledAt = null;
    startedAt = null;
    finishedAt = null;
  } else if (to === S.SCHEDULED) {
    scheduledAt = at;
    startedAt = null;
    finishedAt = null;
  } else if (to === S.IN_PROGRESS) {
    startedAt = at;
  } else {
    finishedAt = at;
  }

  const write: TransitionWrite = {
    id: record.id,
    expected_version: record.version,
    status: to,
    attempt: c.attempt,
    retry_count: c.retryCount,
    snapshot: decision.snapshot,
    not_before: c.notBefore,
    last_error: c.lastError,
    worker_id: c.workerId,
    scheduled_at: scheduledAt,
    started_at: startedAt,
    finished_at: finishedAt,
    t_from: record.status,
    t_event: event.type,
    t_attempt: record.attempt,
    t_by: by ?? defaultBy(record, event),
    t_reason: reasonOf(event),
    t_at: at,
    ob_attempt: null,
    ob_queue: null,
    ob_operation_type: null,
    ob_location_type: null,
    ob_payload: null,
    fe_kind: null,
    fe_attempt: null,
    fe_error: null,
  };
  for (const effect of decision.effects) {
    if (effect.type === 'dispatch') {
      write.ob_attempt = effect.attempt;
      write.ob_queue = queueName(record.route);
      write.ob_operation_type = record.route.operationType;
      write.ob_location_type = record.route.locationType;
      write.ob_payload = {
        operationId: record.id,
        kind: record.kind,
        operationType: record.route.operationType,
        attempt: effect.attempt,
      };
    } else if (effect.type === 'recordFailure') {
      write.fe_kind = record.kind;
      write.fe_attempt = effect.attempt;
      write.fe_error = effect.error;
    }
  }
  return { write, decision };
}
