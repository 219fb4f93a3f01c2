import { describe, expect, it } from 'vitest';
import {
  type CopyCommand,
  type CopyFacts,
  type CopyState,
  decideCopy,
} from '../../machines/decideCopy.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import type { PhysicalCopyStatus } from '../../machines/physicalCopyMachine.ts';

const SAFE: CopyFacts = {
  verifiedArchive: true,
  archive: { copyId: 'a', operationId: 'o', digest: 'sha256:00' },
  archiveProblem: null,
  retained: false,
  retainedBy: [],
  removedMembers: 0,
  receipted: false,
  leaseExpired: false,
};
const ONLY_COPY: CopyFacts = {
  ...SAFE,
  verifiedArchive: false,
  archive: null,
  archiveProblem: 'no live copy of it at a long-term-archive location',
};
const RETAINED: CopyFacts = { ...SAFE, retained: true, retainedBy: ['g-1'] };

const at = (status: PhysicalCopyStatus, count = 0): CopyState => ({
  status,
  deletionFailureCount: count,
  maxDeletionFailures: 2,
  lastError: null,
});

function refusedWith(state: CopyState, command: CopyCommand, facts: CopyFacts) {
  try {
    decideCopy(state, command, facts);
  } catch (err) {
    expect(err).toBeInstanceOf(OpstateError);
    return err as OpstateError;
  }
  throw new Error(`${command.type} in ${state.status} was not refused`);
}

describe('physical-copy machine (decideCopy)', () => {
  it('walks PRESENT → SCHEDULED → IN_PROGRESS → DELETED only on safe facts and a receipt', () => {
    let s = at('PRESENT');
    const step = (command: CopyCommand, facts: CopyFacts) => {
      const d = decideCopy(s, command, facts);
      s = { status: d.status, ...d.context };
      return d.status;
    };
    expect(step({ type: 'SCHEDULE_DELETION' }, SAFE)).toBe('DELETION_SCHEDULED');
    expect(step({ type: 'START_DELETION' }, SAFE)).toBe('DELETION_IN_PROGRESS');
    expect(refusedWith(s, { type: 'DELETION_SUCCEEDED' }, SAFE).code).toBe(OpstateErrorCode.UNSAFE);
    expect(step({ type: 'DELETION_SUCCEEDED' }, { ...SAFE, receipted: true })).toBe('DELETED');
    expect(refusedWith(s, { type: 'CANCEL_DELETION' }, SAFE).message).toMatch(/final state/);
  });

  it('refuses to schedule or start deleting the only copy, an unverified one, or a retained one, saying why', () => {
    for (const status of ['PRESENT', 'DELETION_SCHEDULED'] as const) {
      const command: CopyCommand = {
        type: status === 'PRESENT' ? 'SCHEDULE_DELETION' : 'START_DELETION',
      };
      const only = refusedWith(at(status), command, ONLY_COPY);
      expect(only.code).toBe(OpstateErrorCode.UNSAFE);
      expect(only.message).toMatch(/no verified archive copy.*no live copy of it/);
      const held = refusedWith(at(status), command, RETAINED);
      expect(held.code).toBe(OpstateErrorCode.UNSAFE);
      expect(held.message).toMatch(/retention claim holds it \(group g-1\)/);
    }
  });

  it('resumes an interrupted deletion while under the cap, counting each interruption, then fails it', () => {
    const lapsed = { ...SAFE, leaseExpired: true };
    const first = decideCopy(at('DELETION_IN_PROGRESS'), { type: 'RESUME_DELETION' }, lapsed);
    expect(first).toMatchObject({
      status: 'DELETION_IN_PROGRESS',
      context: { deletionFailureCount: 1 },
    });
    const second = decideCopy(at('DELETION_IN_PROGRESS', 1), { type: 'RESUME_DELETION' }, lapsed);
    expect(second.context.deletionFailureCount).toBe(2);
    const capped = decideCopy(at('DELETION_IN_PROGRESS', 2), { type: 'RESUME_DELETION' }, lapsed);
    expect(capped.status).toBe('DELETION_FAILED');
    expect(capped.context.lastError).toMatch(/interrupted/);
    const held = refusedWith(at('DELETION_IN_PROGRESS'), { type: 'RESUME_DELETION' }, SAFE);
    expect(held.code).toBe(OpstateErrorCode.CONFLICT);
  });

  it('a failed deletion is re-planned by an operator with a fresh budget, never back to PRESENT once a member is gone', () => {
    const failed = decideCopy(
      at('DELETION_IN_PROGRESS'),
      { type: 'DELETION_FAILED', error: '1 member kept: open by pid 7' },
      SAFE,
    );
    expect(failed).toMatchObject({
      status: 'DELETION_FAILED',
      context: { deletionFailureCount: 1, lastError: '1 member kept: open by pid 7' },
    });
    const state = { status: failed.status, ...failed.context };
    const replanned = decideCopy(state, { type: 'REPLAN_DELETION' }, SAFE);
    expect(replanned).toMatchObject({
      status: 'DELETION_SCHEDULED',
      context: { deletionFailureCount: 0, lastError: null },
    });
    expect(refusedWith(state, { type: 'REPLAN_DELETION' }, ONLY_COPY).code).toBe(
      OpstateErrorCode.UNSAFE,
    );
    const gone = refusedWith(state, { type: 'CANCEL_DELETION' }, { ...SAFE, removedMembers: 2 });
    expect(gone.code).toBe(OpstateErrorCode.UNSAFE);
    expect(gone.message).toMatch(/2 of its members were already removed/);
    expect(decideCopy(state, { type: 'CANCEL_DELETION' }, SAFE).status).toBe('PRESENT');
  });

  it('withdraws a scheduled deletion; refuses commands a status does not take, and bad input', () => {
    expect(
      decideCopy(at('DELETION_SCHEDULED'), { type: 'CANCEL_DELETION' }, ONLY_COPY).status,
    ).toBe('PRESENT');
    const early = refusedWith(at('PRESENT'), { type: 'START_DELETION' }, SAFE);
    expect(early.code).toBe(OpstateErrorCode.INVALID_EVENT);
    expect(early.message).toMatch(/accepted: SCHEDULE_DELETION/);
    expect(refusedWith(at('PRESENT'), { type: 'NOPE' } as unknown as CopyCommand, SAFE).code).toBe(
      OpstateErrorCode.BAD_INPUT,
    );
    expect(
      refusedWith(at('DELETION_IN_PROGRESS'), { type: 'DELETION_FAILED', error: '' }, SAFE).code,
    ).toBe(OpstateErrorCode.BAD_INPUT);
  });
});
