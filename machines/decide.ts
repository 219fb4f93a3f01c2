import { type AnyActorScope, createActor, initialTransition } from 'xstate';
import { isOperationKind, OperationKind } from './OperationKind.ts';
import { OpstateError, OpstateErrorCode } from './OpstateError.ts';
import {
  OPERATION_EVENT_TYPES,
  OPERATION_STATUSES,
  type OperationContext,
  type OperationError,
  type OperationEvent,
  type OperationEventType,
  type OperationInput,
  type OperationStatus,
  operationMachine,
  RESET_BY,
  type ResetBy,
  WORKER_EVENT_TYPES,
} from './operationMachine.ts';

/**
 * What the host must do after it has persisted a transition. Tagged by `type`; the host runs them
 * only after commit, so a crash before commit leaves no effect and a crash after leaves the
 * durable record to redo it (for `dispatch`, its SCHEDULE transition, which the relay reads).
 */
export type OperationEffect =
  | { readonly type: 'dispatch'; readonly attempt: number }
  | {
      readonly type: 'abortWork';
      readonly attempt: number;
      readonly workerId: string | null;
      readonly reason: string;
    }
  | { readonly type: 'recordFailure'; readonly attempt: number; readonly error: OperationError };

/** The persisted form of an operation snapshot: plain JSON, stored in `operation.snapshot`. */
export interface PersistedOperationSnapshot {
  readonly status: 'active' | 'done';
  readonly value: OperationStatus;
  readonly context: OperationContext;
  readonly historyValue: Record<string, never>;
  readonly children: Record<string, never>;
}

/** The outcome of one accepted event. */
export interface Decision {
  readonly snapshot: PersistedOperationSnapshot;
  readonly status: OperationStatus;
  readonly context: OperationContext;
  readonly effects: readonly OperationEffect[];
}

const RESETTERS: ReadonlySet<string> = new Set<ResetBy>(RESET_BY);
const STATUS_VALUES: ReadonlySet<string> = new Set(OPERATION_STATUSES);
const EVENT_TYPES: ReadonlySet<string> = new Set(OPERATION_EVENT_TYPES);

type MachineSnapshot = ReturnType<typeof operationMachine.resolveState>;
type Action = Parameters<AnyActorScope['actionExecutor']>[0];

/**
 * One inert actor scope for every pure transition. xstate's `transition()` builds a throwaway
 * actor (and its system) per call, which costs more than the step itself; this machine has no
 * children, timers or system ids, so one scope that only collects the actions serves every call
 * (transitions are synchronous: `collected` is swapped per call).
 */
let collected: Action[] = [];
const inertScope: AnyActorScope = (() => {
  // The actor is never started; its input only satisfies the constructor's initial snapshot.
  const self = createActor(operationMachine, { input: { kind: OperationKind.RAW_DATA_PACKAGE } });
  return {
    self,
    id: '',
    sessionId: '',
    system: self.system,
    logger: () => {},
    defer: () => {},
    emit: () => {},
    stopChild: () => {},
    actionExecutor: (action: Action) => {
      collected.push(action);
    },
  };
})();

/** The pure `transition(machine, snapshot, event)`, on the shared inert scope. */
function step(current: MachineSnapshot, event: OperationEvent): [MachineSnapshot, Action[]] {
  const actions: Action[] = [];
  collected = actions;
  try {
    return [operationMachine.transition(current, event, inertScope), actions];
  } finally {
    collected = [];
  }
}

/**
 * The persisted form of a snapshot of this machine: what `getPersistedSnapshot` returns for it,
 * built directly. The machine is flat (no nested or parallel states, no history, no children,
 * context of JSON primitives), so the persisted form is the status, the value and a copy of the
 * context; `getPersistedSnapshot` walks the snapshot for actors and history it cannot have, and
 * was a large share of every transition's time and garbage. The machine tests hold the two equal.
 */
function persist(snapshot: MachineSnapshot): PersistedOperationSnapshot {
  return {
    status: snapshot.status,
    output: snapshot.output,
    error: snapshot.error,
    value: snapshot.value,
    historyValue: {},
    context: { ...snapshot.context },
    children: {},
  } as unknown as PersistedOperationSnapshot;
}

/**
 * One resolved snapshot per lifecycle state. A flat machine's snapshot differs between two
 * operations in the same state only by context, so restoring one is a copy of its state's
 * template with the stored context, instead of resolving the state's nodes again per event.
 */
const resolved = new Map<OperationStatus, MachineSnapshot>();

function resolve(value: OperationStatus, context: OperationContext): MachineSnapshot {
  let template = resolved.get(value);
  if (template === undefined) {
    template = operationMachine.resolveState({ value, context });
    resolved.set(value, template);
  }
  return { ...template, context } as MachineSnapshot;
}

function effectsOf(actions: ReadonlyArray<{ type: string; params?: unknown }>): OperationEffect[] {
  const effects: OperationEffect[] = [];
  for (const action of actions) {
    if (
      action.type === 'dispatch' ||
      action.type === 'abortWork' ||
      action.type === 'recordFailure'
    ) {
      effects.push({ type: action.type, ...(action.params as object) } as OperationEffect);
    }
  }
  return effects;
}

function badInput(message: string, details: Record<string, unknown> = {}): OpstateError {
  return new OpstateError(OpstateErrorCode.BAD_INPUT, message, { details });
}

/**
 * Builds the first snapshot of a new operation (PENDING, attempt 1).
 *
 * @example
 * ```ts
 * const { snapshot } = createOperationState({ kind: OperationKind.LONG_TERM_ARCHIVE });
 * ```
 */
export function createOperationState(input: OperationInput): Decision {
  if (!isOperationKind(input.kind)) {
    throw badInput(
      `unknown operation kind ${JSON.stringify(input.kind)}; use one of the OperationKind values`,
      { kind: input.kind },
    );
  }
  const maxRetries = input.maxRetries;
  if (maxRetries !== undefined && (!Number.isInteger(maxRetries) || maxRetries < 0)) {
    throw badInput(`maxRetries must be a whole number ≥ 0, got ${String(maxRetries)}`);
  }
  const [snapshot, actions] = initialTransition(operationMachine, input);
  return {
    snapshot: persist(snapshot),
    status: snapshot.value as OperationStatus,
    context: snapshot.context,
    effects: effectsOf(actions),
  };
}

/** A field check of `parseOperationEvent`, at module level: no closure per event checked. */
function need(type: OperationEventType, field: string, ok: boolean, what: string): void {
  if (!ok) throw badInput(`${type}.${field} must be ${what}`, { field });
}

function isAttempt(a: unknown): boolean {
  return Number.isInteger(a) && (a as number) >= 1;
}

/**
 * Checks that a value from outside (a CLI, an API call, a message) is a well-formed lifecycle
 * event, and returns it typed. Throws `BAD_INPUT` naming what is wrong.
 *
 * @example
 * ```ts
 * const event = parseOperationEvent(JSON.parse(body));
 * ```
 */
export function parseOperationEvent(value: unknown): OperationEvent {
  if (typeof value !== 'object' || value === null) throw badInput('an event must be an object');
  const e = value as Record<string, unknown>;
  if (typeof e.type !== 'string' || !EVENT_TYPES.has(e.type)) {
    throw badInput(
      `unknown event type ${JSON.stringify(e.type)}; use one of ${OPERATION_EVENT_TYPES.join(', ')}`,
    );
  }
  const type = e.type as OperationEventType;
  if (e.at !== undefined)
    need(type, 'at', typeof e.at === 'string' && !Number.isNaN(Date.parse(e.at)), 'an ISO time');
  switch (type) {
    case 'START':
      need(type, 'attempt', isAttempt(e.attempt), 'a whole number ≥ 1');
      need(
        type,
        'workerId',
        typeof e.workerId === 'string' && e.workerId.length > 0,
        'a non-empty string',
      );
      break;
    case 'COMPLETE':
      need(type, 'attempt', isAttempt(e.attempt), 'a whole number ≥ 1');
      break;
    case 'FAIL': {
      need(type, 'attempt', isAttempt(e.attempt), 'a whole number ≥ 1');
      const err = e.error as Record<string, unknown> | undefined;
      need(
        type,
        'error',
        typeof err === 'object' &&
          err !== null &&
          typeof err.message === 'string' &&
          typeof err.retryable === 'boolean',
        'an object {message: string, retryable: boolean}',
      );
      if (e.retryDelayMs !== undefined) {
        need(
          type,
          'retryDelayMs',
          Number.isInteger(e.retryDelayMs) && (e.retryDelayMs as number) >= 0,
          'a whole number of ms ≥ 0',
        );
      }
      break;
    }
    case 'RESET':
      need(
        type,
        'by',
        typeof e.by === 'string' && RESETTERS.has(e.by),
        `one of ${[...RESETTERS].join(', ')}`,
      );
      need(
        type,
        'reason',
        typeof e.reason === 'string' && e.reason.length > 0,
        'a non-empty string',
      );
      if (e.attempt !== undefined)
        need(type, 'attempt', isAttempt(e.attempt), 'a whole number ≥ 1');
      break;
    case 'CANCEL':
      need(
        type,
        'reason',
        typeof e.reason === 'string' && e.reason.length > 0,
        'a non-empty string',
      );
      break;
    case 'SCHEDULE':
    case 'RETRY':
      break;
  }
  return value as OperationEvent;
}

/**
 * Restores a persisted snapshot (already upgraded to the current machine version) into a machine
 * snapshot, checking its shape first so that a damaged row gives a clear error instead of a
 * machine in an impossible state.
 */
export function restoreOperationSnapshot(persisted: unknown): MachineSnapshot {
  const p = persisted as Partial<PersistedOperationSnapshot> | null;
  if (
    typeof p !== 'object' ||
    p === null ||
    typeof p.value !== 'string' ||
    !STATUS_VALUES.has(p.value)
  ) {
    throw new OpstateError(
      OpstateErrorCode.SNAPSHOT_VERSION,
      `stored snapshot has no known lifecycle state (value ${JSON.stringify(p?.value)}); it was not written by this machine version`,
    );
  }
  const c = p.context as Partial<OperationContext> | undefined;
  if (
    typeof c !== 'object' ||
    c === null ||
    !isOperationKind(c.kind) ||
    !Number.isInteger(c.attempt) ||
    !Number.isInteger(c.retryCount) ||
    !Number.isInteger(c.maxRetries)
  ) {
    throw new OpstateError(
      OpstateErrorCode.SNAPSHOT_VERSION,
      'stored snapshot context lacks kind, attempt, retryCount or maxRetries; it was not written by this machine version',
    );
  }
  return resolve(p.value as OperationStatus, p.context as OperationContext);
}

/**
 * The pure core of the host: applies one event to a persisted snapshot and returns the next
 * snapshot with the effects to run after it is persisted. Nothing is executed. A refused event
 * throws: `INVALID_EVENT` when the state does not take it, `STALE_ATTEMPT` when a worker event (or
 * a fenced RESET) names an attempt that is no longer current. The caller's snapshot is unchanged.
 *
 * @example
 * ```ts
 * const next = decide(row.snapshot, { type: 'START', attempt: 1, workerId: 'w-1', at: now });
 * next.status; // 'IN_PROGRESS'
 * ```
 */
export function decide(persisted: unknown, event: OperationEvent): Decision {
  const checked = parseOperationEvent(event);
  const current = restoreOperationSnapshot(persisted);
  const key = memoKey(current, checked);
  const known = key === undefined ? undefined : decided.get(key);
  if (known !== undefined) return copyOf(known);
  const [next, actions] = step(current, checked);
  if (next === current || (next.value === current.value && next.context === current.context)) {
    throw refusal(current, checked);
  }
  const decision: Decision = {
    snapshot: persist(next),
    status: next.value as OperationStatus,
    context: next.context,
    effects: effectsOf(actions),
  };
  if (key === undefined) return decision;
  if (decided.size >= DECIDED_MAX) decided.clear();
  decided.set(key, decision);
  return copyOf(decision);
}

/**
 * Accepted decisions of the hot-path events, by their whole input. The machine is a pure function
 * of (state, context, event) — no clock, no randomness, no children — so equal inputs give equal
 * decisions, and a batch of rows with equal inputs (one claim's SCHEDULEs share their `at`, one
 * completion batch's COMPLETEs too) runs it once instead of once per row: a transition built about
 * 10 kB of garbage. Only inputs of primitive values are keyed, so their JSON is the whole input;
 * refusals are never kept; each caller gets its own copy. Bounded: cleared when full.
 */
const decided = new Map<string, Decision>();
const DECIDED_MAX = 512;
const MEMO_EVENTS: ReadonlySet<string> = new Set<OperationEventType>([
  'SCHEDULE',
  'START',
  'COMPLETE',
]);

function primitiveValues(o: object): boolean {
  // for…in rather than Object.values: no array per call on this path.
  for (const k in o) {
    const v = (o as Record<string, unknown>)[k];
    if (typeof v === 'object' ? v !== null : typeof v === 'function') return false;
  }
  return true;
}

function memoKey(current: MachineSnapshot, event: OperationEvent): string | undefined {
  if (!MEMO_EVENTS.has(event.type)) return undefined;
  if (!primitiveValues(current.context) || !primitiveValues(event)) return undefined;
  return JSON.stringify([current.value, current.context, event]);
}

function copyOf(d: Decision): Decision {
  return {
    snapshot: {
      ...d.snapshot,
      historyValue: {},
      context: { ...d.snapshot.context },
      children: {},
    },
    status: d.status,
    context: { ...d.context },
    effects: d.effects.map((e) => ({ ...e })),
  };
}

/** The event types the machine takes in a state (before guards). */
export function acceptedEvents(status: OperationStatus): OperationEventType[] {
  const node = operationMachine.states[status];
  return node === undefined ? [] : (node.ownEvents as OperationEventType[]);
}

function refusal(current: MachineSnapshot, event: OperationEvent): OpstateError {
  const status = current.value as OperationStatus;
  const accepted = acceptedEvents(status);
  const details = { status, event: event.type, attempt: current.context.attempt };
  // A superseded attempt is named as such first, whatever state the operation has moved on to.
  if ((WORKER_EVENT_TYPES.has(event.type) || event.type === 'RESET') && 'attempt' in event) {
    if (event.attempt !== undefined && event.attempt !== current.context.attempt) {
      return new OpstateError(
        OpstateErrorCode.STALE_ATTEMPT,
        `${event.type} for attempt ${event.attempt} refused: the operation's current attempt is ${current.context.attempt}`,
        { details: { ...details, eventAttempt: event.attempt } },
      );
    }
  }
  if (!accepted.includes(event.type)) {
    return new OpstateError(
      OpstateErrorCode.INVALID_EVENT,
      `${event.type} is not accepted in ${status}` +
        (accepted.length > 0 ? ` (accepted: ${accepted.join(', ')})` : ' (it is a final state)'),
      { details },
    );
  }
  return new OpstateError(
    OpstateErrorCode.INVALID_EVENT,
    `${event.type} was refused in ${status} by the machine's guards`,
    { details },
  );
}

export type { OperationKind };
