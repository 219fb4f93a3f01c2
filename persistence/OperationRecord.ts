import type { PersistedOperationSnapshot } from '../machines/decide.ts';
import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationError, OperationStatus } from '../machines/operationMachine.ts';
import type { LocationType, OperationType, Route } from '../machines/routing.ts';
import type { SnapshotEnvelope } from '../machines/snapshotEnvelope.ts';
import type { Row } from './openDatabase.ts';
import { operationErrorOf } from './UnreadableValue.ts';

/** One operation's base row: the snapshot, its envelope and the columns projected from it. */
export interface OperationRecord {
  readonly id: string;
  readonly kind: OperationKind;
  readonly route: Route;
  readonly status: OperationStatus;
  readonly attempt: number;
  readonly retryCount: number;
  readonly maxRetries: number;
  /** Compare-and-set counter: +1 on every write. */
  readonly version: number;
  readonly snapshot: PersistedOperationSnapshot;
  readonly envelope: SnapshotEnvelope;
  readonly groupId: string | null;
  readonly notBefore: Date | null;
  readonly createdAt: Date;
  readonly scheduledAt: Date | null;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null;
  /** The last failure; a stored one that is no error record reads as code `UNREADABLE`. */
  readonly lastError: OperationError | null;
  readonly workerId: string | null;
  /** How long one attempt may run from its START (ms), given at submit; null: the kind's deadline. */
  readonly deadlineMs: number | null;
  /** Higher is claimed first among due operations (-100…100, default 0), given at submit. */
  readonly priority: number;
}

/** The select list that `toOperationRecord` reads (table alias `o`). */
export const OPERATION_COLUMNS = `o.id, o.kind, o.operation_type, o.location_type, o.status,
  o.attempt, o.retry_count, o.max_retries, o.version, o.snapshot, o.machine_id,
  o.machine_version, o.xstate_version, o.group_id, o.not_before, o.created_at, o.scheduled_at,
  o.started_at, o.finished_at, o.last_error, o.worker_id, o.deadline_ms, o.priority, o.route_site,
  o.route_location`;

/**
 * The route a row's columns name (`operation_type`, `location_type`, `route_site`,
 * `route_location`): a site route when it has a site, else a legacy one.
 *
 * @example
 * ```ts
 * queueName(routeOfRow(row)); // 'cologne_lta_long_term_archive_long_term_archive_transfer'
 * ```
 */
export function routeOfRow(row: Row): Route {
  const route = {
    operationType: row.operation_type as OperationType,
    locationType: row.location_type as LocationType,
  };
  return row.route_site == null || row.route_location == null
    ? route
    : { ...route, site: String(row.route_site), location: String(row.route_location) };
}

/** A timestamp from either driver (Date, or a string) as a Date. */
export function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(String(value));
}

/** Maps a row selected with `OPERATION_COLUMNS`. */
export function toOperationRecord(row: Row): OperationRecord {
  return {
    id: String(row.id),
    kind: row.kind as OperationKind,
    route: routeOfRow(row),
    status: row.status as OperationStatus,
    attempt: Number(row.attempt),
    retryCount: Number(row.retry_count),
    maxRetries: Number(row.max_retries),
    version: Number(row.version),
    // jsonb comes decoded from either driver; restoring checks the snapshot's shape.
    snapshot: row.snapshot as PersistedOperationSnapshot,
    envelope: {
      machineId: String(row.machine_id),
      machineVersion: Number(row.machine_version),
      xstateVersion: String(row.xstate_version),
    },
    groupId: row.group_id == null ? null : String(row.group_id),
    notBefore: toDate(row.not_before),
    createdAt: toDate(row.created_at) as Date,
    scheduledAt: toDate(row.scheduled_at),
    startedAt: toDate(row.started_at),
    finishedAt: toDate(row.finished_at),
    lastError: row.last_error == null ? null : operationErrorOf(row.last_error),
    workerId: row.worker_id == null ? null : String(row.worker_id),
    deadlineMs: row.deadline_ms == null ? null : Number(row.deadline_ms),
    priority: Number(row.priority ?? 0),
  };
}
