import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { deploymentPerTest, HANDLERS } from '../actors/harness.ts';

const deploy = deploymentPerTest();

describe('opstate worker under the id of a live worker', () => {
  it('refuses to start: exit 2, naming the id and the fix, no ready line, and the live worker keeps its heartbeat', async () => {
    const dep = await deploy();
    const live = dep.runtime.startWorker({
      kinds: [OperationKind.STAGING],
      handlers: { [OperationKind.STAGING]: async () => ({ outputs: [] }) },
      workerId: 'twin',
    });
    await live.ready;
    const second = dep.spawnCli([
      'worker',
      '--kinds',
      'all',
      '--handlers',
      HANDLERS,
      '--id',
      'twin',
    ]);
    expect(await second.exited).toBe(2);
    const text = second.output.join('\n');
    expect(text).toMatch(/Worker id "twin" is in use/);
    expect(text).toMatch(/give this one another id \(--id/);
    expect(text).toContain('[CONFIG]');
    // Refused before it read anything: no ready line a supervisor could take for a start.
    expect(second.printed('started for')).toBe(false);
    const beats = await dep.runtime.transport.heartbeats.list();
    expect(beats.filter((b) => b.workerId === 'twin')).toHaveLength(1);
    await live.stop();
  });
});
