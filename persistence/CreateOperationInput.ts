import { z } from 'zod';
import { createOperationState, type Decision } from '../machines/decide.ts';
import { isOperationKind, OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { allRoutes, defaultRoute, queueName, type Route } from '../machines/routing.ts';
import { currentEnvelope } from '../machines/snapshotEnvelope.ts';
import { isoText } from './isoText.ts';
import type { OperationInsert } from './sql/insertOperations.ts';
import { isUuid, SUBTYPE_SPEC, type SubtypeSpec, uuidSchema } from './subtypeFields.ts';
import { timeOrderedId } from './timeOrderedId.ts';

/** What a caller passes to create one operation. */
export interface CreateOperationInput {
  readonly kind: OperationKind;
  /**
   * The stage-specific fields of the kind's subtype table, by camelCase key, e.g. for
   * `long_term_archive`: `{ rawDataPackageId, sourceLocationId, destinationLocationId, archiveKey? }`.
   */
  readonly fields: Readonly<Record<string, string | null | undefined>>;
  /** Physical copy ids the operation consumes. */
  readonly inputs?: readonly string[];
  /**
   * Choose the id (a uuid) instead of a new time-ordered one (`timeOrderedId`): creating with the
   * same id twice is a CONFLICT. Any uuid is accepted; time-ordered ones keep the indexes' writes
   * on few pages as the history grows.
   */
  readonly id?: string;
  readonly groupId?: string;
  readonly maxRetries?: number;
  /** Routing, when not the kind's default (must be one of the frozen routes). */
  readonly route?: Route;
  /** Who asked, for the creation transition row (default `operator`). */
  readonly createdBy?: string;
}

const ROUTES = new Set(allRoutes().map(queueName));

const baseSchema = z.strictObject({
  kind: z.string(),
  fields: z.record(z.string(), z.unknown()),
  inputs: z.array(uuidSchema).optional(),
  id: uuidSchema.optional(),
  groupId: uuidSchema.optional(),
  maxRetries: z.number().int().min(0).max(1000).optional(),
  route: z
    .strictObject({ operationType: z.string(), locationType: z.string() })
    .refine((r) => ROUTES.has(queueName(r as Route)), {
      error: 'is not one of the frozen routes (see QUEUE_OPERATIONS_BY_LOCATION_TYPE)',
    })
    .optional(),
  createdBy: z.string().min(1).optional(),
});

const BASE_KEYS: ReadonlySet<string> = new Set(Object.keys(baseSchema.shape));

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * The common request checked without the schemas (every createMany row goes through here, and
 * building zod's parse state cost more than the rest of the row): true only for what `baseSchema`
 * and the kind's fields schema both accept, without a custom route (left to the schemas). False
 * means only "let the schemas judge": they name the problem.
 */
function plainlyValid(input: CreateOperationInput, spec: SubtypeSpec): boolean {
  if (!isPlainObject(input)) return false;
  for (const key of Object.keys(input)) if (!BASE_KEYS.has(key)) return false;
  const { fields, inputs, id, groupId, maxRetries, route, createdBy } = input;
  if (route !== undefined) return false;
  if (id !== undefined && !isUuid(id)) return false;
  if (groupId !== undefined && !isUuid(groupId)) return false;
  if (
    maxRetries !== undefined &&
    !(typeof maxRetries === 'number' && Number.isSafeInteger(maxRetries) && maxRetries >= 0)
  ) {
    return false;
  }
  if (maxRetries !== undefined && maxRetries > 1000) return false;
  if (createdBy !== undefined && !(typeof createdBy === 'string' && createdBy.length > 0)) {
    return false;
  }
  if (inputs !== undefined) {
    if (!Array.isArray(inputs)) return false;
    for (const i of inputs) if (!isUuid(i)) return false;
  }
  if (!isPlainObject(fields)) return false;
  let known = 0;
  for (const f of spec.fields) {
    const v = fields[f.key];
    if (Object.hasOwn(fields, f.key)) known++;
    if (v === undefined || v === null) {
      if (f.required) return false;
    } else if (f.type === 'uuid' ? !isUuid(v) : !(typeof v === 'string' && v.length > 0)) {
      return false;
    }
  }
  return known === Object.keys(fields).length;
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

function badInput(message: string, details: Record<string, unknown>): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message, { details });
}

function describe(error: z.ZodError, prefix: string): string {
  return error.issues
    .map((i) => `${[prefix, ...i.path.map(String)].filter(Boolean).join('.')}: ${i.message}`)
    .join('; ');
}

/**
 * Validates a create request and builds its row, initial snapshot included. Throws `BAD_INPUT`
 * naming every problem; nothing is written then.
 *
 * @example
 * ```ts
 * const row = toOperationInsert({ kind: OperationKind.TRANSFER, fields: {...} }, new Date(clock.now()));
 * ```
 */
export function toOperationInsert(input: CreateOperationInput, now: Date): OperationInsert {
  const kind = (input as { kind?: unknown } | null)?.kind;
  if (!isOperationKind(kind)) {
    throw badInput(
      `unknown operation kind ${JSON.stringify(kind)}; use one of ${OPERATION_KINDS.join(', ')}`,
      { kind },
    );
  }
  const spec = SUBTYPE_SPEC[kind];
  let data: Record<string, string | null | undefined>;
  if (plainlyValid(input, spec)) {
    data = { ...input.fields };
  } else {
    const base = baseSchema.safeParse(input);
    if (!base.success) throw badInput(`invalid ${kind} operation: ${describe(base.error, '')}`, {});
    const fields = spec.schema.safeParse(input.fields);
    if (!fields.success) {
      throw badInput(`invalid ${kind} operation: ${describe(fields.error, 'fields')}`, {
        expected: spec.fields.map((f) => f.key),
      });
    }
    data = fields.data;
  }
  const inputs = [...new Set(input.inputs ?? [])];
  const route = input.route ?? defaultRoute(kind);
  const state = initialState(kind, input.maxRetries);
  const envelope = currentEnvelope();
  return {
    id: input.id ?? timeOrderedId(now.getTime()),
    kind,
    operation_type: route.operationType,
    location_type: route.locationType,
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
    not_before: state.context.notBefore,
    created_at: isoText(now),
    created_by: input.createdBy ?? 'operator',
    fields: data,
    inputs,
  };
}
