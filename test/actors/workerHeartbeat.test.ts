import { describe, expect, it } from 'vitest';
import { systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { MAX_HEARTBEAT_BYTES } from '../../transport/HeartbeatKey.ts';
import { createInProcessTransport } from '../../transport/inprocess/createInProcessTransport.ts';
import { startWorkerHeartbeat } from '../../worker/WorkerHeartbeat.ts';

const op = (operationId: string, attempt = 1) => ({
  kind: OperationKind.TRANSFER,
  operationId,
  attempt,
});
const touch = { working: () => {} };

/** A heartbeat of worker `w-1` on an in-process transport, stopped and closed after `fn`. */
async function withHeartbeat(
  fn: (
    hb: ReturnType<typeof startWorkerHeartbeat>,
    transport: ReturnType<typeof createInProcessTransport>,
  ) => Promise<void>,
): Promise<void> {
  const transport = createInProcessTransport({ timing: { heartbeatIntervalMs: 60_000 } });
  const hb = startWorkerHeartbeat({
    workerId: 'w-1',
    transport,
    clock: systemClock,
    logger: memoryLogger(),
  });
  try {
    await fn(hb, transport);
  } finally {
    await hb.stop({ remove: true });
    await transport.close();
  }
}

describe('the worker heartbeat', () => {
  it('lists a delivery from receipt, once, and its own listing is not another worker’s', async () => {
    await withHeartbeat(async (hb, transport) => {
      expect(hb.receive(op('a'), touch)).toBe(true);
      // Held already (another delivery of it on its way, or running here): not taken over.
      expect(hb.receive(op('a', 2), touch)).toBe(false);
      await hb.cover();
      expect((await transport.heartbeats.list())[0]?.held).toEqual([op('a')]);
      expect(await transport.heartbeats.isAlive(OperationKind.TRANSFER, 'a', 1)).toBe(true);
      expect(
        await transport.heartbeats.isAlive(OperationKind.TRANSFER, 'a', 1, {
          exceptWorkerId: 'w-1',
        }),
      ).toBe(false);
      hb.release('a', 1);
      await hb.cover();
      expect((await transport.heartbeats.list())[0]?.held).toEqual([]);
    });
  });

  it("lets go of an attempt's hold only: the next attempt of the operation, held here since, stays listed", async () => {
    await withHeartbeat(async (hb, transport) => {
      hb.hold(op('a', 1), touch);
      // Attempt 1's handler hangs past its deadline; attempt 2 starts here and holds it.
      hb.hold(op('a', 2), touch);
      // Attempt 1's handler returns at last: its release must not unlist attempt 2.
      hb.release('a', 1);
      await hb.cover();
      expect((await transport.heartbeats.list())[0]?.held).toEqual([op('a', 2)]);
      hb.release('a', 2);
      await hb.cover();
      expect((await transport.heartbeats.list())[0]?.held).toEqual([]);
    });
  });

  it('never beats over the size cap: the newest held are left out, with one warning, and covering one of them rejects', async () => {
    const transport = createInProcessTransport({ timing: { heartbeatIntervalMs: 60_000 } });
    const logger = memoryLogger();
    const hb = startWorkerHeartbeat({ workerId: 'w-big', transport, clock: systemClock, logger });
    const long = (i: number) => op(`${'x'.repeat(100)}-${String(i).padStart(6, '0')}`);
    // About 120 bytes each: N of them run over the cap.
    const N = Math.ceil(MAX_HEARTBEAT_BYTES / 100);
    try {
      await hb.claimed;
      for (let i = 0; i < N; i++) hb.hold(long(i), touch);
      await expect(hb.cover(long(N - 1).operationId)).rejects.toMatchObject({
        code: OpstateErrorCode.CONFIG,
        message: expect.stringMatching(/lower the worker's concurrency/),
      });
      const [beat] = await transport.heartbeats.list();
      const listed = beat?.held.length ?? 0;
      expect(listed).toBeGreaterThan(0);
      expect(listed).toBeLessThan(N);
      // Those held longest are listed; covering one of them resolves.
      expect(beat?.held[0]).toEqual(long(0));
      await hb.cover(long(0).operationId);
      const warnings = logger.lines.filter((l) =>
        /more operations than one heartbeat/.test(l.message),
      );
      expect(warnings).toHaveLength(1);
      expect(warnings[0]?.fields).toMatchObject({ workerId: 'w-big', held: N, listed });
    } finally {
      await hb.stop({ remove: true });
      await transport.close();
    }
  });

  it('a second heartbeat under a live worker id is refused and leaves the first one’s key alone', async () => {
    const transport = createInProcessTransport({ timing: { heartbeatIntervalMs: 60_000 } });
    const first = startWorkerHeartbeat({
      workerId: 'w-1',
      transport,
      clock: systemClock,
      logger: memoryLogger(),
    });
    const second = startWorkerHeartbeat({
      workerId: 'w-1',
      transport,
      clock: systemClock,
      logger: memoryLogger(),
    });
    try {
      await first.claimed;
      await expect(second.claimed).rejects.toMatchObject({ code: OpstateErrorCode.CONFIG });
      await expect(second.cover()).rejects.toMatchObject({ code: OpstateErrorCode.CONFIG });
      await second.stop({ remove: true });
      expect((await transport.heartbeats.list()).map((b) => b.instance)).toEqual([first.instance]);
    } finally {
      await first.stop({ remove: true });
      await transport.close();
    }
  });
});
