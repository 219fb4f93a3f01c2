import { z } from 'zod';
import { createOperationState, type Decision } from '../machines/decide.ts';
import { isOperationKind, OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { allRoutes, defaultRoute, queueName, type Route } from '../machines/routing.ts';
import { currentEnvelope } from '../machines/snapshotEnvelope.ts';
import type { OperationInsert } from './sql/insertOperations.ts';
import { SUBTYPE_SPEC, uuidSchema } from './subtypeFields.ts';

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
  /** Choose the id (a uuid) instead of a random one: creating with the same id twice is a CONFLICT. */
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
  const base = baseSchema.safeParse(input);
  if (!base.success) throw badInput(`invalid ${kind} operation: ${describe(base.error, '')}`, {});
  const fields = SUBTYPE_SPEC[kind].schema.safeParse(input.fields);
  if (!fields.success) {
    throw badInput(`invalid ${kind} operation: ${describe(fields.error, 'fields')}`, {
      expected: SUBTYPE_SPEC[kind].fields.map((f) => f.key),
    });
  }
  const inputs = [...new Set(input.inputs ?? [])];
  const route = input.route ?? defaultRoute(kind);
  const state = initialState(kind, input.maxRetries);
  const envelope = currentEnvelope();
  return {
    id: input.id ?? crypto.randomUUID(),
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
    target_location_id: fields.data[SUBTYPE_SPEC[kind].targetLocationKey] as string,
    not_before: state.context.notBefore,
    created_at: now.toISOString(),
    created_by: input.createdBy ?? 'operator',
    fields: fields.data,
    inputs,
  };
}
