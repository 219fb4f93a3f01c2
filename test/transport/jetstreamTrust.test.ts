import {
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { planMonitorResets } from '../../actors/planMonitorPass.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultRoute, queueSubject } from '../../machines/routing.ts';
import { MAX_HEARTBEAT_BYTES } from '../../transport/HeartbeatKey.ts';
import {
  createJetStreamTransport,
  type JetStreamTransport,
} from '../../transport/jetstream/createJetStreamTransport.ts';
import type { TransportEvent, TransportTiming } from '../../transport/Transport.ts';
import { uniquePrefix, waitFor } from './helpers.ts';
import { TEST_TIMING } from './transportContract.ts';

const SERVERS = 'nats://127.0.0.1:4222';
const ROUTE = defaultRoute(OperationKind.TRANSFER);

async function open(
  tag: string,
  timing: Partial<TransportTiming> = TEST_TIMING,
): Promise<{ transport: JetStreamTransport; prefix: string }> {
  const prefix = uniquePrefix(tag);
  const transport = await createJetStreamTransport({
    servers: SERVERS,
    prefix,
    timing,
    pullExpiresMs: 1000,
  });
  await transport.ensure([]);
  return { transport, prefix };
}

describe('heartbeats bound to the worker that started the operation (real KV)', () => {
  it('worker A listing worker B’s running operation does not keep it alive once B stops beating', async () => {
    const { transport } = await open('bind');
    try {
      const hb = transport.heartbeats;
      const x = { kind: OperationKind.UNPACK, operationId: 'op-b', attempt: 1 };
      const running = [
        {
          id: 'op-b',
          kind: x.kind,
          status: 'IN_PROGRESS' as const,
          attempt: 1,
          workerId: 'worker-b',
        },
      ];
      const resets = async () =>
        planMonitorResets({
          now: Date.now(),
          timeoutMs: transport.timing.heartbeatTimeoutMs,
          beats: await hb.list(),
          operations: running,
        });
      await hb.beat('worker-b', [x], 'instance-b');
      await hb.beat('worker-a', [x], 'instance-a');
      expect(await resets()).toEqual([]);
      // B stops; A goes on beating and listing B's operation.
      let found: Awaited<ReturnType<typeof resets>> = [];
      await waitFor(async () => {
        await hb.beat('worker-a', [x], 'instance-a');
        found = await resets();
        return found.length > 0;
      }, 'the monitor to judge B’s operation abandoned');
      const beats = await hb.list();
      const a = beats.find((b) => b.workerId === 'worker-a');
      expect(Date.now() - (a?.at ?? 0)).toBeLessThan(transport.timing.heartbeatTimeoutMs);
      expect(found[0]?.event.reason).toMatch(/running on worker-b, whose last heartbeat was/);
      expect(found[0]?.event.reason).toMatch(/also listed by worker-a, which did not start it/);
    } finally {
      await transport.destroy();
    }
  });
});

describe('heartbeat size cap (real KV)', () => {
  // A heartbeat interval longer than the test: every read below falls within one interval.
  const LONG: Partial<TransportTiming> = {
    heartbeatIntervalMs: 60_000,
    heartbeatTimeoutMs: 120_000,
    reconcilerFloorMs: 180_000,
    ackWaitMs: 240_000,
  };

  it('a value over the cap written by another client is refused, counted for nothing and reported once per key per interval', async () => {
    const { transport, prefix } = await open('hbcap', LONG);
    const events: TransportEvent[] = [];
    transport.onEvent((e) => events.push(e));
    try {
      const kv = await new Kvm(transport.connection).open(`${prefix}_heartbeats`);
      const held = `["unpack","op-x",1],`.repeat(3300);
      const big = `{"held":[${held}["unpack","op-y",1]]}`;
      expect(big.length).toBeGreaterThan(MAX_HEARTBEAT_BYTES);
      expect(big.length).toBeLessThan(MAX_HEARTBEAT_BYTES + 1024);
      await kv.put('worker.evil', big);
      await kv.put('worker.bad', 'not json');
      await transport.heartbeats.beat('worker-ok', [], 'n');
      for (let i = 0; i < 5; i++) {
        expect((await transport.heartbeats.list()).map((b) => b.workerId)).toEqual(['worker-ok']);
      }
      expect(await transport.heartbeats.isAlive(OperationKind.UNPACK, 'op-x')).toBe(false);
      const refused = events.filter((e) => e.type === 'heartbeat_refused');
      expect(refused.map((e) => e.key).sort()).toEqual(['worker.bad', 'worker.evil']);
      expect(refused.find((e) => e.key === 'worker.evil')).toMatchObject({
        size: big.length,
        reason: expect.stringMatching(/over the 65536-byte cap/),
      });
    } finally {
      await transport.destroy();
    }
  });

  it('the bucket refuses a value well over the cap, and an older bucket without the cap gets it', async () => {
    const prefix = uniquePrefix('hbold');
    // A bucket as an older release made it: no value cap.
    const first = await createJetStreamTransport({ servers: SERVERS, prefix, timing: TEST_TIMING });
    try {
      await new Kvm(first.connection).create(`${prefix}_heartbeats`, { history: 1 });
      const kv = await new Kvm(first.connection).open(`${prefix}_heartbeats`);
      await kv.put('worker.huge', 'x'.repeat(200_000)); // accepted: no cap yet
      await first.ensure([]);
      await expect(kv.put('worker.huge', 'x'.repeat(200_000))).rejects.toThrow(
        /maximum message size|message size exceeds/i,
      );
    } finally {
      await first.destroy();
    }
  });
});

describe('dispatch stream limits (real nats-server)', () => {
  it('refuses an oversized publish and one on a subject no consumer reads; an older stream is brought in line', async () => {
    const prefix = uniquePrefix('limits');
    const transport = await createJetStreamTransport({
      servers: SERVERS,
      prefix,
      timing: TEST_TIMING,
      maxStreamBytes: 8 * 1024 * 1024,
    });
    try {
      const jsm = await jetstreamManager(transport.connection);
      // A stream as an older release made it: every subject under the prefix, no size limits.
      await jsm.streams.add({
        name: `${prefix}_dispatch`,
        subjects: [`${prefix}.dispatch.>`],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        discard: DiscardPolicy.Old,
      });
      await transport.ensure([ROUTE]);
      const { config } = await jsm.streams.info(`${prefix}_dispatch`);
      expect(config).toMatchObject({
        discard: DiscardPolicy.New,
        max_msg_size: 64 * 1024,
        max_bytes: 8 * 1024 * 1024,
      });
      expect(config.subjects).toContain(queueSubject(prefix, ROUTE));
      expect(config.subjects).not.toContain(`${prefix}.dispatch.>`);
      const js = jetstream(transport.connection);
      const subject = queueSubject(prefix, ROUTE);
      await js.publish(subject, new Uint8Array(1000)); // within the limit: stored
      await expect(js.publish(subject, new Uint8Array(64 * 1024 + 1))).rejects.toThrow(
        /maximum message size|message size exceeds/i,
      );
      await expect(
        js.publish(`${prefix}.dispatch.nowhere.nothing`, new Uint8Array(10), { timeout: 2000 }),
      ).rejects.toThrow();
      expect((await jsm.streams.info(`${prefix}_dispatch`)).state.messages).toBe(1);
    } finally {
      await transport.destroy();
    }
  });

  it('refuses a maxMessageBytes over the stream’s max_msg_size, and a tiny maxStreamBytes, before connecting', async () => {
    await expect(
      createJetStreamTransport({ servers: SERVERS, maxMessageBytes: 64 * 1024 + 1 }),
    ).rejects.toMatchObject({ code: OpstateErrorCode.CONFIG });
    await expect(
      createJetStreamTransport({ servers: SERVERS, maxStreamBytes: 1000 }),
    ).rejects.toMatchObject({ code: OpstateErrorCode.CONFIG });
  });
});
