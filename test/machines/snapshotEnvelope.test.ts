import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { decide, restoreOperationSnapshot } from '../../machines/decide.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { operationMachine } from '../../machines/operationMachine.ts';
import {
  type EnvelopedSnapshot,
  envelop,
  OPERATION_MACHINE_VERSION,
  upgradeSnapshot,
  XSTATE_VERSION,
} from '../../machines/snapshotEnvelope.ts';

/** Snapshots written by machine version 1 and committed: they must restore for as long as we ship. */
const golden = JSON.parse(
  readFileSync(new URL('./golden/operation-v1.json', import.meta.url), 'utf8'),
) as Record<string, EnvelopedSnapshot>;

describe('golden snapshots of machine version 1', () => {
  it('holds one per resting state', () => {
    expect(Object.keys(golden).sort()).toEqual([
      'COMPLETED',
      'FAILED',
      'IN_PROGRESS',
      'PENDING',
      'PENDING_AFTER_FAILURE',
      'SCHEDULED',
    ]);
  });

  it.each(Object.entries(golden))(
    '%s restores through createActor and the envelope',
    (name, stored) => {
      expect(stored.machineVersion).toBe(1);
      const snapshot = upgradeSnapshot(stored);
      const restored = restoreOperationSnapshot(snapshot);
      expect(restored.value).toBe(name.replace('_AFTER_FAILURE', ''));
      const actor = createActor(operationMachine, {
        snapshot: snapshot as never,
        input: { kind: OperationKind.LONG_TERM_ARCHIVE },
      });
      expect(actor.getSnapshot().status).not.toBe('error');
      expect(actor.getSnapshot().context).toEqual(restored.context);
    },
  );

  it('continues the lifecycle from a restored snapshot', () => {
    const running = upgradeSnapshot(golden.IN_PROGRESS as EnvelopedSnapshot);
    expect(decide(running, { type: 'COMPLETE', attempt: 1 }).status).toBe('COMPLETED');
    const retrying = upgradeSnapshot(golden.PENDING_AFTER_FAILURE as EnvelopedSnapshot);
    const d = decide(retrying, { type: 'SCHEDULE' });
    expect(d.effects).toEqual([{ type: 'dispatch', attempt: 2 }]);
    const failed = upgradeSnapshot(golden.FAILED as EnvelopedSnapshot);
    expect(decide(failed, { type: 'RETRY' }).context.attempt).toBe(2);
  });
});

describe('snapshot envelope', () => {
  it('records machine id, machine version and the xstate version', () => {
    const e = envelop({});
    expect(e).toMatchObject({ machineId: 'operation', machineVersion: OPERATION_MACHINE_VERSION });
    expect(e.xstateVersion).toMatch(/^5\.\d+\.\d+/);
    expect(XSTATE_VERSION).toBe(e.xstateVersion);
  });

  it('refuses a newer machine version with a message that names the fix', () => {
    const stored = { ...(golden.PENDING as EnvelopedSnapshot), machineVersion: 99 };
    expect(() => upgradeSnapshot(stored)).toThrow(
      expect.objectContaining({
        code: OpstateErrorCode.SNAPSHOT_VERSION,
        message: expect.stringMatching(/version 99.*upgrade opstate/),
      }),
    );
  });

  it('refuses another machine’s snapshot and a damaged version', () => {
    const pending = golden.PENDING as EnvelopedSnapshot;
    expect(() => upgradeSnapshot({ ...pending, machineId: 'physical_copy' })).toThrow(
      expect.objectContaining({ code: OpstateErrorCode.SNAPSHOT_VERSION }),
    );
    expect(() => upgradeSnapshot({ ...pending, machineVersion: 0 })).toThrow(
      expect.objectContaining({ code: OpstateErrorCode.SNAPSHOT_VERSION }),
    );
  });
});
