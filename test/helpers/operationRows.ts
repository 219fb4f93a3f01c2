/**
 * The columns a copy of an operation row takes from the real row it copies: all but its id and
 * the references to rows of one database (group, target location), which a caller adds when the
 * copy stays in that database. For fills that store history with SQL, so that every copy is a
 * row the runtime itself once wrote.
 */
export const COPIED_OPERATION_COLUMNS = [
  'kind',
  'operation_type',
  'location_type',
  'status',
  'attempt',
  'retry_count',
  'max_retries',
  'snapshot',
  'machine_id',
  'machine_version',
  'xstate_version',
  'version',
  'created_at',
  'scheduled_at',
  'started_at',
  'finished_at',
  'status_changed_at',
  'worker_id',
] as const;

/**
 * The copied columns as a SQL list, each name after `prefix` (`''` for an insert's column list,
 * `'t.'` for the row copied from).
 *
 * @example
 * ```ts
 * `insert into operation (id, ${copiedColumns('')}) select gen_random_uuid(), ${copiedColumns('t.')} from operation t where …`;
 * ```
 */
export const copiedColumns = (prefix: string): string =>
  COPIED_OPERATION_COLUMNS.map((c) => prefix + c).join(', ');
