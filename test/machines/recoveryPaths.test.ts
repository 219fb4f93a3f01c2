import type { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { chaosFigures } from '../../chaos/figures.ts';
import { recoveryOf } from '../../cli/commands/demoReport.ts';
import { SYSTEM_ACTORS } from '../../machines/actors.ts';
import { parseOperationEvent } from '../../machines/decide.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { RESET_BY } from '../../machines/operationMachine.ts';
import { isRecoveryPath, RECOVERY_PATHS } from '../../machines/recoveryPaths.ts';
import { replayTransitions } from '../../machines/replayTransitions.ts';
import { isSystemActor, submitterProblem } from '../../machines/submitter.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { loggingObserver, RECOVERY_PATHS as OBSERVED } from '../../observe/RuntimeObserver.ts';
import { createMetrics } from '../../runtime/Metrics.ts';
import { resolveRuntimeTiming } from '../../runtime/RuntimeTiming.ts';

/**
 * The recovery paths are one list; everything that names them takes it from there. Each place is
 * asked about every path, so a path missing anywhere fails here.
 */
describe('the recovery paths, everywhere they are named', () => {
  it('are the heartbeat monitor, the deadline, the reconciler and the broker', () => {
    expect(RECOVERY_PATHS).toEqual(['heartbeat_monitor', 'deadline', 'reconciler', 'broker']);
    expect(OBSERVED).toBe(RECOVERY_PATHS);
    expect(RESET_BY).toEqual([...RECOVERY_PATHS, 'operator']);
    expect(SYSTEM_ACTORS).toEqual(['scheduler', ...RECOVERY_PATHS]);
    expect(isRecoveryPath('operator')).toBe(false);
  });

  it.each([
    ['heartbeat_monitor', 'heartbeat monitor'],
    ['deadline', 'deadline'],
    ['reconciler', 'reconciler'],
    ['broker', 'broker redelivery'],
  ] as const)(
    '%s: a RESET it sends is taken, a submitter may not take its name, the history replays it, the demo names it (%s), the logs, metrics and chaos figures count it',
    async (path, name) => {
      expect(
        parseOperationEvent({ type: 'RESET', by: path, reason: 'r', attempt: 1 }),
      ).toMatchObject({ by: path });
      expect(isSystemActor(path)).toBe(true);
      expect(submitterProblem(path)).toBe(
        `'${path}' is one of opstate's own actors; name the service or person that submits`,
      );
      const at = new Date('2026-12-01T12:00:00Z');
      const row = { attempt: 1, reason: 'r', at, error: null };
      const steps = replayTransitions({ kind: OperationKind.TRANSFER, maxRetries: 3 }, [
        { ...row, id: 1, from: null, to: 'PENDING', event: 'CREATE', by: 'ingest' },
        { ...row, id: 2, from: 'PENDING', to: 'SCHEDULED', event: 'SCHEDULE', by: 'scheduler' },
        { ...row, id: 3, from: 'SCHEDULED', to: 'IN_PROGRESS', event: 'START', by: 'w-1' },
        { ...row, id: 4, from: 'IN_PROGRESS', to: 'PENDING', event: 'RESET', by: path },
      ]);
      expect(steps.at(-1)?.event).toMatchObject({ type: 'RESET', by: path, attempt: 1 });
      expect(steps.some((s) => s.diverged)).toBe(false);
      const reset = {
        from: 'IN_PROGRESS',
        to: 'PENDING',
        event: 'RESET',
        by: path,
        attempt: 1,
      } as const;
      expect(recoveryOf([{ ...reset, reason: 'r', at }])).toBe(name);
      const logger = memoryLogger();
      const transition = {
        operationId: 'op-1',
        kind: OperationKind.TRANSFER,
        ...reset,
        attempt: 2,
        at: at.getTime(),
      };
      loggingObserver(logger).transitions([transition]);
      expect(logger.lines).toMatchObject([
        { level: 'WARNING', message: 'operation recovered', fields: { path } },
      ]);
      const metrics = createMetrics(logger, { defaultMetrics: false });
      metrics.observer.transitions([transition]);
      const text = await (metrics.registry as Registry).metrics();
      expect(text).toContain(`opstate_recoveries_total{kind="transfer",path="${path}"} 1`);
      expect(text).toContain(
        `opstate_transitions_total{kind="transfer",event="RESET",by="${path}"} 1`,
      );
      const figures = chaosFigures(
        {
          operations: [
            {
              id: 'op-1',
              kind: 'transfer',
              status: 'COMPLETED',
              attempt: 2,
              maxRetries: 3,
              lastError: null,
            },
          ],
          transitions: [
            {
              id: 1,
              operationId: 'op-1',
              from: 'SCHEDULED',
              to: 'IN_PROGRESS',
              event: 'START',
              attempt: 1,
              by: 'w-1',
              reason: null,
              at,
            },
            {
              id: 2,
              operationId: 'op-1',
              ...reset,
              reason: 'r',
              at: new Date(at.getTime() + 1_000),
            },
          ],
          steps: [],
          copies: [],
          archiveRecords: [],
          archiveObjects: [],
          receipts: [],
        } as unknown as Parameters<typeof chaosFigures>[0],
        [],
        resolveRuntimeTiming(),
      );
      expect(figures.find((f) => f.figure === `resets_${path}`)?.value).toBe(1);
      expect(figures.find((f) => f.figure === `recovery_${path}_max`)?.value).toBe(1_000);
    },
  );
});
