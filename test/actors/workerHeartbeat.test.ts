import { describe, expect, it } from 'vitest';
import { memoryLogger } from '../../actors/Logger.ts';
import { startWorkerHeartbeat } from '../../actors/WorkerHeartbeat.ts';
import { systemClock } from '../../machines/Clock.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { createInProcessTransport } from '../../transport/inprocess/createInProcessTransport.ts';

const op = (operationId: string, attempt = 1) => ({
  kind: OperationKind.TRANSFER,
  operationId,
  attempt,
});
const touch = { working: () => {} };

describe('the worker heartbeat', () => {
  it('lists a delivery from receipt, once, and its own listing is not another worker’s', async () => {
    const transport = createInProcessTransport({ timing: { heartbeatIntervalMs: 60_000 } });
    const hb = startWorkerHeartbeat({
      workerId: 'w-1',
      transport,
      clock: systemClock,
      logger: memoryLogger(),
    });
    try {
      expect(hb.receive(op('a'), touch)).toBe(true);
      // Held already (another delivery of it on its way, or running here): not taken over.
      expect(hb.receive(op('a', 2), touch)).toBe(false);
      await hb.cover();
      expect((await transport.heartbeats.list())[0]?.held).toEqual([op('a')]);
      expect(await transport.heartbeats.isAlive(OperationKind.TRANSFER, 'a', 1)).toBe(true);
      expect(await transport.heartbeats.isAlive(OperationKind.TRANSFER, 'a', 1, 'w-1')).toBe(false);
      hb.release('a');
      await hb.cover();
      expect((await transport.heartbeats.list())[0]?.held).toEqual([]);
    } finally {
      await hb.stop({ remove: true });
      await transport.close();
    }
  });
});
