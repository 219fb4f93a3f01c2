import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { defaultRoute } from '../../machines/routing.ts';
import { archiveOperation, type Deployment, startDeployment, waitFor } from './harness.ts';

let d: Deployment | undefined;
afterEach(async () => {
  await d?.close();
  d = undefined;
});

describe('a worker given dispatches it cannot use', () => {
  it('drops them with a warning, stays up, and keeps completing real work', async () => {
    d = await startDeployment();
    const dep = d;
    dep.runtime.startControlPlane();
    const worker = await dep.readyWorker();
    const route = defaultRoute(OperationKind.LONG_TERM_ARCHIVE);
    const dispatch = (operationId: string, kind = OperationKind.LONG_TERM_ARCHIVE) => ({
      operationId,
      kind,
      operationType: route.operationType,
      attempt: 1,
    });
    const ghost = randomUUID();
    await dep.runtime.transport.publish(route, dispatch(ghost)); // no such operation
    await dep.runtime.transport.publish(route, dispatch('not-a-uuid')); // malformed id
    const real = await archiveOperation(dep);
    // A dispatch naming the real operation under the wrong kind (another attempt number, so the
    // broker's dedup of `<id>:<attempt>` cannot swallow the real dispatch).
    await dep.runtime.transport.publish(route, {
      ...dispatch(real.id, OperationKind.STAGING),
      attempt: 7,
    });

    await waitFor(
      async () => (await dep.runtime.store.load(real.id)).status === 'COMPLETED',
      'the real operation',
      30_000,
    );
    await waitFor(
      () =>
        worker.output.filter((l) => l.includes('dispatch names no known operation')).length >= 2,
      'both unknown dispatches to be dropped',
    );
    expect(worker.output.some((l) => l.includes(ghost))).toBe(true);
    await waitFor(
      () => worker.output.some((l) => l.includes('does not match') && l.includes(real.id)),
      'the wrong-kind dispatch to be dropped',
    );
    expect(worker.proc.exitCode).toBeNull();
    const view = await dep.runtime.get(real.id);
    expect(view.transitions.filter((t) => t.event === 'COMPLETE')).toHaveLength(1);
  });
});
