import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { JetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { transportNames } from '../../transport/TransportNames.ts';
import { archiveOperation, deploymentPerTest, waitFor } from './harness.ts';

const deploy = deploymentPerTest();

describe('a worker given dispatches it cannot use', () => {
  it('drops them with a warning, stays up, and keeps completing real work', async () => {
    const dep = await deploy();
    dep.runtime.startControlPlane();
    const worker = await dep.readyWorker();
    const real = await archiveOperation(dep);
    // The real operation's site queue, which the worker reads (the legacy queues are the control
    // plane's to drain).
    const { route } = await dep.runtime.get(real.id);
    const dispatch = (operationId: string, kind = OperationKind.LONG_TERM_ARCHIVE) => ({
      operationId,
      kind,
      operationType: route.operationType,
      attempt: 1,
    });
    const ghost = randomUUID();
    await dep.runtime.transport.publish(route, dispatch(ghost)); // no such operation
    await dep.runtime.transport.publish(route, dispatch('not-a-uuid')); // malformed id
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

    // Junk on the dispatch subject: each message is terminated and named in one WARNING line
    // with its subject, the reason and a short prefix (never the payload).
    const subject = transportNames(dep.prefix).subject(route);
    const nc = (dep.runtime.transport as JetStreamTransport).connection;
    const junk = [
      Uint8Array.from([0xff, 0x00, 0x13, 0x37, 0xfe]),
      new TextEncoder().encode('{"operationId": "broken'),
      new TextEncoder().encode(JSON.stringify({ hello: 'world' })),
      // Over the transport's 4 KiB, under the stream's 64 KiB: stored, then refused on receipt.
      new Uint8Array(8 * 1024).fill(0x41),
    ];
    for (const data of junk) await nc.request(subject, data); // a JetStream publish ack
    // Over the stream's max_msg_size: the broker refuses it; no worker ever sees it.
    const huge = await nc.request(subject, new Uint8Array(512 * 1024).fill(0x41));
    expect(huge.string()).toMatch(/message size exceeds maximum allowed/);
    const rejected = () =>
      worker.output.filter(
        (l) =>
          l.includes('"level":40') &&
          l.includes('"msg":"dispatch message rejected and terminated"'),
      );
    await waitFor(() => rejected().length === junk.length, 'a warning per junk message');
    const lines = rejected().join('\n');
    for (const reason of ['not JSON', 'wrong shape', 'oversized: 8192 bytes'])
      expect(lines).toContain(reason);
    expect(lines).toContain(`"subject":"${subject}"`);
    expect(lines).toContain('\\\\xff\\\\x00');
    expect(Math.max(...rejected().map((l) => l.length))).toBeLessThan(1_000);
    expect(worker.proc.exitCode).toBeNull();
    const view = await dep.runtime.get(real.id);
    expect(view.transitions.filter((t) => t.event === 'COMPLETE')).toHaveLength(1);
  });
});
