import { OPERATOR } from '../machines/actors.ts';
import { deadlineProblem } from '../machines/deadlines.ts';
import { createOperationState, type Decision } from '../machines/decide.ts';
import { describeValue } from '../machines/describeValue.ts';
import { isOperationKind, OPERATION_KINDS, OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { DEFAULT_PRIORITY, priorityProblem } from '../machines/priority.ts';
import {
  allRoutes,
  DEFAULT_LOCATION_TYPE,
  DEFAULT_OPERATION_TYPE,
  queueName,
  type Route,
  type RoutedLocation,
  siteRoute,
} from '../machines/routing.ts';
import { currentEnvelope } from '../machines/snapshotEnvelope.ts';
import { submitterProblem } from '../machines/submitter.ts';
import { isoText } from './isoText.ts';
import type { CreateOperationInput } from './publicRecords.ts';
import type { OperationInsert } from './sql/insertOperations.ts';
import { isUuid, SUBTYPE_SPEC, type SubtypeSpec, UUID_EXAMPLE } from './subtypeFields.ts';
import { timeOrderedId } from './timeOrderedId.ts';

export type { CreateOperationInput, CreateOperationOptions } from './publicRecords.ts';

const ROUTES: ReadonlySet<string> = new Set(allRoutes().map(queueName));
const KEYS = [
  'kind',
  'fields',
  'inputs',
  'id',
  'groupId',
  'maxRetries',
  'deadlineMs',
  'notBefore',
  'priority',
  'route',
  'by',
] as const;
const KNOWN_KEYS: ReadonlySet<string> = new Set(KEYS);
const MAX_RETRIES = 1000;

/** `TRANSFER` for `transfer`: the kind as `OperationKind.TRANSFER` names it. */
const KIND_NAME: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(OperationKind).map(([name, value]) => [value, name]),
);

/** Each kind's field names, as messages list them. */
const KNOWN_FIELDS: Readonly<Record<string, string>> = Object.fromEntries(
  OPERATION_KINDS.map((k) => [k, SUBTYPE_SPEC[k].fields.map((f) => f.key).join(', ')]),
);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** An ISO 8601 date-time with its zone: `2026-12-05T18:00:00Z`, `…T18:00:00.5+01:00`. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** The time `notBefore` names, or undefined when it names none. */
function timeOf(value: unknown): Date | undefined {
  const at =
    value instanceof Date
      ? value
      : typeof value === 'string' && ISO_TIME.test(value)
        ? new Date(value)
        : undefined;
  return at === undefined || Number.isNaN(at.getTime()) ? undefined : at;
}

const mustBeUuid = (what: string, value: unknown) =>
  `${what} must be a uuid such as ${UUID_EXAMPLE}; got ${describeValue(value)}`;

/** What is wrong with a kind's `fields`, in the caller's terms; nothing for valid fields. */
function fieldProblems(fields: unknown, kind: OperationKind, spec: SubtypeSpec): string[] {
  const name = KIND_NAME[kind] ?? kind;
  const known = KNOWN_FIELDS[kind];
  if (!isPlainObject(fields)) {
    return [
      `fields of ${name} must be an object of field names to values (${known}); got ${describeValue(fields)}`,
    ];
  }
  const problems: string[] = [];
  for (const key of Object.keys(fields)) {
    if (!spec.byKey.has(key)) problems.push(`unknown field '${key}' for ${name}; known: ${known}`);
  }
  for (const f of spec.fields) {
    const v = fields[f.key];
    if (v === undefined || v === null) {
      if (f.required) problems.push(`field '${f.key}' is required for ${name}`);
    } else if (f.type === 'uuid') {
      if (!isUuid(v)) problems.push(mustBeUuid(`field '${f.key}' of ${name}`, v));
    } else if (!(typeof v === 'string' && v.length > 0)) {
      problems.push(
        `field '${f.key}' of ${name} must be a non-empty string; got ${describeValue(v)}`,
      );
    }
  }
  return problems;
}

/** What is wrong with the options beside the fields; nothing for valid ones. */
function optionProblems(input: Record<string, unknown>): string[] {
  const problems: string[] = [];
  for (const key of Object.keys(input)) {
    if (!KNOWN_KEYS.has(key)) problems.push(`unknown option '${key}'; known: ${KEYS.join(', ')}`);
  }
  const { inputs, id, groupId, maxRetries, deadlineMs, notBefore, priority, route, by } = input;
  if (id !== undefined && !isUuid(id)) problems.push(mustBeUuid('id', id));
  if (groupId !== undefined && !isUuid(groupId)) problems.push(mustBeUuid('groupId', groupId));
  if (
    maxRetries !== undefined &&
    !(
      typeof maxRetries === 'number' &&
      Number.isSafeInteger(maxRetries) &&
      maxRetries >= 0 &&
      maxRetries <= MAX_RETRIES
    )
  ) {
    problems.push(
      `maxRetries must be a whole number from 0 to ${MAX_RETRIES}; got ${describeValue(maxRetries)}`,
    );
  }
  if (deadlineMs !== undefined) {
    const problem = deadlineProblem(deadlineMs);
    if (problem !== undefined) {
      problems.push(`deadlineMs ${problem}; leave it out for the kind's deadline`);
    }
  }
  if (notBefore !== undefined && timeOf(notBefore) === undefined) {
    problems.push(
      `notBefore must be a Date or an ISO 8601 date-time with its zone, such as 2026-12-05T18:00:00Z; got ${describeValue(notBefore)}`,
    );
  }
  if (priority !== undefined) {
    const problem = priorityProblem(priority);
    if (problem !== undefined) problems.push(`priority ${problem}`);
  }
  if (inputs !== undefined) {
    if (!Array.isArray(inputs)) {
      problems.push(
        `inputs must be a list of physical copy ids (uuids); got ${describeValue(inputs)}`,
      );
    } else {
      inputs.forEach((i, n) => {
        if (!isUuid(i)) problems.push(mustBeUuid(`inputs[${n}]`, i));
      });
    }
  }
  if (route !== undefined) {
    const r = route as Partial<Route> | null;
    const named =
      isPlainObject(r) &&
      Object.keys(r).every((k) => k === 'operationType' || k === 'locationType') &&
      typeof r.operationType === 'string' &&
      typeof r.locationType === 'string';
    if (!named || !ROUTES.has(queueName(r as Route))) {
      problems.push(
        `route ${describeValue(route)} is not one of the frozen routes (QUEUE_OPERATIONS_BY_LOCATION_TYPE); leave it out for the kind's default, or give { operationType, locationType } of one of ${[...ROUTES].join(', ')}`,
      );
    }
  }
  if (by !== undefined) {
    const problem = submitterProblem(by);
    if (problem !== undefined) problems.push(`by ${problem}`);
  }
  return problems;
}

/**
 * The id a create request names for the location it routes on (`ROUTED_LOCATION_FIELD`), as
 * given: unchecked, for looking the location up before the request is validated.
 */
export function routedLocationId(input: unknown): unknown {
  if (!isPlainObject(input) || !isOperationKind(input.kind) || !isPlainObject(input.fields)) {
    return undefined;
  }
  return input.fields[SUBTYPE_SPEC[input.kind].targetLocationKey];
}

/** The site route of a create request on its routed location (see `toOperationInsert`). */
function routeOf(input: CreateOperationInput, location: RoutedLocation | undefined): Route {
  const operationType = input.route?.operationType ?? DEFAULT_OPERATION_TYPE[input.kind];
  if (location === undefined) {
    return input.route ?? { operationType, locationType: DEFAULT_LOCATION_TYPE[input.kind] };
  }
  if (input.route !== undefined && input.route.locationType !== location.locationType) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `route ${queueName(input.route)} is for a ${input.route.locationType} location, but ${SUBTYPE_SPEC[input.kind].targetLocationKey} names ${location.site}/${location.name}, a ${location.locationType} location; the queue follows that location: leave route out, or give its locationType ${location.locationType}`,
      { details: { route: input.route, location } },
    );
  }
  return siteRoute(operationType, location);
}

// The first snapshot depends only on (kind, maxRetries) and is plain data that is only ever
// serialised, so it is computed once per pair: the machine's initialTransition costs ~100 µs,
// which would otherwise dominate a batched create.
const initialStates = new Map<string, Decision>();

function initialState(kind: OperationKind, maxRetries: number | undefined): Decision {
  const key = `${kind}:${maxRetries ?? ''}`;
  let state = initialStates.get(key);
  if (state === undefined) {
    state = createOperationState(maxRetries === undefined ? { kind } : { kind, maxRetries });
    initialStates.set(key, state);
  }
  return state;
}

/**
 * Validates a create request and builds its row, initial snapshot included. Throws `BAD_INPUT`
 * naming every problem in the caller's terms (a field that is required, a field the kind does not
 * have with the ones it does, a value with what is allowed); nothing is written then. The route
 * is the site route of the location it routes on, looked up in `locations` by id (`siteRoute`:
 * refused when that location cannot take the operation type); a location not there is left to the
 * insert, which refuses an unknown one.
 *
 * @example
 * ```ts
 * const row = toOperationInsert({ kind: OperationKind.TRANSFER, fields: {...} }, new Date(clock.now()));
 * ```
 */
export function toOperationInsert(
  input: CreateOperationInput,
  now: Date,
  locations: ReadonlyMap<string, RoutedLocation> = new Map(),
): OperationInsert {
  const given: unknown = input;
  const kind = isPlainObject(given) ? given.kind : undefined;
  if (!isOperationKind(kind)) {
    const problem = isPlainObject(given)
      ? `unknown operation kind ${describeValue(kind)}`
      : `an operation to create must be an object { kind, fields, … }; got ${describeValue(given)}`;
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${problem}; use one of ${OPERATION_KINDS.join(', ')}`,
      { details: { kind } },
    );
  }
  const spec = SUBTYPE_SPEC[kind];
  const problems = [
    ...optionProblems(given as Record<string, unknown>),
    ...fieldProblems(input.fields, kind, spec),
  ];
  if (problems.length > 0) {
    throw new OpstateError(OpstateErrorCode.BAD_INPUT, problems.join('; '), {
      details: { kind, problems, expected: spec.fields.map((f) => f.key) },
    });
  }
  const data = input.fields as Readonly<Record<string, string | null | undefined>>;
  const inputs = [...new Set(input.inputs ?? [])];
  const route = routeOf(input, locations.get(data[spec.targetLocationKey] as string));
  const state = initialState(kind, input.maxRetries);
  const envelope = currentEnvelope();
  return {
    id: input.id ?? timeOrderedId(now.getTime()),
    kind,
    operation_type: route.operationType,
    location_type: route.locationType,
    route_site: route.site ?? null,
    route_location: route.location ?? null,
    status: state.status,
    attempt: state.context.attempt,
    retry_count: state.context.retryCount,
    max_retries: state.context.maxRetries,
    snapshot: state.snapshot,
    machine_id: envelope.machineId,
    machine_version: envelope.machineVersion,
    xstate_version: envelope.xstateVersion,
    group_id: input.groupId ?? null,
    target_location_id: data[spec.targetLocationKey] as string,
    // A delayed start lives in the column the scheduler reads; the machine's own notBefore is its
    // retry backoff, and the first SCHEDULE writes the column from it again.
    not_before:
      input.notBefore === undefined
        ? state.context.notBefore
        : (timeOf(input.notBefore) as Date).toISOString(),
    deadline_ms: input.deadlineMs ?? null,
    priority: input.priority ?? DEFAULT_PRIORITY,
    created_at: isoText(now),
    created_by: input.by ?? OPERATOR,
    fields: { ...data },
    inputs,
  };
}
