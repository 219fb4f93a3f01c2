import { OPERATOR } from '../machines/actors.ts';
import type { Clock } from '../machines/Clock.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import type { OperationEvent } from '../machines/operationMachine.ts';
import type { AppliedTransition } from '../persistence/applyEvents.ts';
import type { OperationStore } from '../persistence/OperationStore.ts';

/**
 * How many times an operator command is decided again after losing its compare-and-set. The
 * scheduler, a worker or the monitor may move the operation between the read and the write (an
 * operation is scheduled within milliseconds of its submission); each retry re-reads the row and
 * asks the machine again, so a move that makes the command invalid is refused with the machine's
 * reason rather than overwritten.
 */
export const OPERATOR_COMMAND_ATTEMPTS = 5;

/**
 * Applies an operator command (`RETRY`, `RESET` or `CANCEL`), recorded as sent by `by` (default
 * `operator`; a named operator is `operatorActor(name, from)`).
 * A lost race (`CONFLICT`) is decided again on the row as it now is, up to
 * {@link OPERATOR_COMMAND_ATTEMPTS} times; every other refusal is the machine's and is thrown as
 * it is. Any other event is refused with `BAD_INPUT` and nothing is written.
 *
 * @example
 * ```ts
 * const t = await applyOperatorCommand(store, clock, id, { type: 'CANCEL', reason: 'not wanted' });
 * ```
 */
export async function applyOperatorCommand(
  store: Pick<OperationStore, 'apply'>,
  clock: Clock,
  id: string,
  event: OperationEvent,
  by: string = OPERATOR,
): Promise<AppliedTransition> {
  if (event.type !== 'RETRY' && event.type !== 'RESET' && event.type !== 'CANCEL') {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${event.type} is a worker or scheduler event; an operator may send RETRY, RESET or CANCEL`,
    );
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await store.apply(id, { ...event, at: new Date(clock.now()).toISOString() }, { by });
    } catch (err) {
      const lostRace = err instanceof OpstateError && err.code === OpstateErrorCode.CONFLICT;
      if (!lostRace || attempt >= OPERATOR_COMMAND_ATTEMPTS) throw err;
    }
  }
}
