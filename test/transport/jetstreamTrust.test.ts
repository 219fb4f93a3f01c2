import {
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { planMonitorResets } from '../../control-plane/planMonitorPass.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultRoute, queueSubject, type Route } from '../../machines/routing.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { logTransportEvents } from '../../observe/logTransportEvents.ts';
import { DeliverySlots } from '../../transport/DeliverySlots.ts';
import { MAX_HEARTBEAT_BYTES } from '../../transport/HeartbeatKey.ts';
import {
  createJetStreamTransport,
  type JetStreamTransport,
} from '../../transport/jetstream/createJetStreamTransport.ts';
import { MaxDeliveriesWatcher } from '../../transport/jetstream/MaxDeliveriesWatcher.ts';
import { pullBackoffMs } from '../../transport/jetstream/pullBackoff.ts';
import type { TransportEvent, TransportTiming } from '../../transport/Transport.ts';
import { TransportEventHub } from '../../transport/TransportEventHub.ts';
import { transportNames } from '../../transport/TransportNames.ts';
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
    insecureNats: true,
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
      const held = `["unpack","op-x",1],`.repeat(Math.ceil(MAX_HEARTBEAT_BYTES / 20) + 1);
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
        reason: expect.stringMatching(new RegExp(`over the ${MAX_HEARTBEAT_BYTES}-byte cap`)),
      });
    } finally {
      await transport.destroy();
    }
  });

  it('the bucket refuses a value well over the cap, and an older bucket without the cap gets it', async () => {
    const prefix = uniquePrefix('hbold');
    // A bucket as an older release made it: no value cap.
    const first = await createJetStreamTransport({
      insecureNats: true,
      servers: SERVERS,
      prefix,
      timing: TEST_TIMING,
    });
    try {
      await new Kvm(first.connection).create(`${prefix}_heartbeats`, { history: 1 });
      const kv = await new Kvm(first.connection).open(`${prefix}_heartbeats`);
      await kv.put('worker.huge', 'x'.repeat(MAX_HEARTBEAT_BYTES + 100_000)); // accepted: no cap yet
      await first.ensure([]);
      await expect(
        kv.put('worker.huge', 'x'.repeat(MAX_HEARTBEAT_BYTES + 100_000)),
      ).rejects.toThrow(/maximum message size|message size exceeds/i);
    } finally {
      await first.destroy();
    }
  });
});

describe('dispatch stream limits (real nats-server)', () => {
  it('refuses an oversized publish and one on a subject no consumer reads; an older stream is brought in line', async () => {
    const prefix = uniquePrefix('limits');
    const transport = await createJetStreamTransport({
      insecureNats: true,
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
      createJetStreamTransport({
        insecureNats: true,
        servers: SERVERS,
        maxMessageBytes: 64 * 1024 + 1,
      }),
    ).rejects.toMatchObject({ code: OpstateErrorCode.CONFIG });
    await expect(
      createJetStreamTransport({ insecureNats: true, servers: SERVERS, maxStreamBytes: 1000 }),
    ).rejects.toMatchObject({ code: OpstateErrorCode.CONFIG });
  });
});

describe('MAX_DELIVERIES advisories are checked against the broker (real nats-server)', () => {
  async function deployment(tag: string, maxDeliver = 2) {
    const prefix = uniquePrefix(tag);
    const transport = await createJetStreamTransport({
      insecureNats: true,
      servers: SERVERS,
      prefix,
      timing: { ...TEST_TIMING, maxDeliver, ackWaitMs: 60_000 },
    });
    await transport.ensure([ROUTE]);
    const nc = transport.connection;
    const jsm = await jetstreamManager(nc);
    const names = transportNames(prefix);
    const hub = new TransportEventHub();
    const events: TransportEvent[] = [];
    hub.on((e) => events.push(e));
    const watcher = new MaxDeliveriesWatcher(nc, jsm, names, hub, 4096, { recheckMs: 50 });
    watcher.start();
    const js = jetstream(nc);
    const consumer = await js.consumers.get(names.stream, names.consumer(ROUTE));
    const publish = (operationId: string) =>
      transport.publish(ROUTE, {
        operationId,
        kind: OperationKind.TRANSFER,
        operationType: ROUTE.operationType,
        attempt: 1,
      });
    const forge = (seq: number) =>
      nc.publish(
        `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${names.stream}.${names.consumer(ROUTE)}`,
        JSON.stringify({
          type: 'io.nats.jetstream.advisory.v1.max_deliver',
          stream: names.stream,
          consumer: names.consumer(ROUTE),
          stream_seq: seq,
          deliveries: maxDeliver,
        }),
      );
    const stored = async (seq: number) =>
      (await jsm.streams.getMessage(names.stream, { seq })) !== null;
    const dispose = async () => {
      watcher.stop();
      await transport.destroy();
    };
    return { transport, jsm, names, watcher, events, consumer, publish, forge, stored, dispose };
  }

  it('a forged advisory naming a live message’s sequence leaves the message in the stream', async () => {
    const d = await deployment('forged');
    try {
      const { seq } = await d.publish('live').then(async () => {
        const m = await d.consumer.next({ expires: 5000 });
        if (m === null) throw new Error('the dispatch was not delivered');
        return m; // held: delivered, not settled
      });
      d.forge(seq);
      await waitFor(() => d.watcher.judged >= 1, 'the watcher to judge the advisory');
      expect(await d.stored(seq)).toBe(true);
      expect(d.events).toEqual([]);
      // A forged advisory for a message not yet delivered changes nothing either.
      const queued =
        (await d.publish('queued')) && (await d.jsm.streams.info(d.names.stream)).state.last_seq;
      d.forge(queued);
      await waitFor(() => d.watcher.judged >= 2, 'the watcher to judge the second advisory');
      expect(await d.stored(queued)).toBe(true);
      expect(d.events).toEqual([]);
    } finally {
      await d.dispose();
    }
  });

  it('a message really given up is removed once the broker’s state proves it (the ack floor passed it)', async () => {
    const d = await deployment('givenup');
    try {
      await d.publish('doomed');
      const first = await d.consumer.next({ expires: 5000 });
      expect([first?.string(), first?.info.deliveryCount]).toEqual([
        expect.stringContaining('doomed'),
        1,
      ]);
      first?.nak();
      const again = await d.consumer.next({ expires: 5000 });
      expect([again?.string(), again?.info.deliveryCount]).toEqual([
        expect.stringContaining('doomed'),
        2,
      ]);
      again?.nak(); // used up: the server sends the real advisory when it next tries to deliver
      await d.publish('busy');
      const busy = await d.consumer.next({ expires: 5000 });
      expect(busy?.string()).toContain('busy');
      await waitFor(() => d.watcher.judged >= 1, 'the real advisory to be judged');
      // 'busy' is outstanding: whether 'doomed' is too cannot be told yet, so it stays.
      expect(await d.stored(first?.seq ?? 0)).toBe(true);
      expect(d.watcher.suspects).toBe(1);
      busy?.ack();
      await waitFor(() => d.events.some((e) => e.type === 'max_deliveries'), 'the removal');
      expect(await d.stored(first?.seq ?? 0)).toBe(false);
      expect(d.events[0]).toMatchObject({
        type: 'max_deliveries',
        message: { operationId: 'doomed' },
      });
      expect(d.watcher.suspects).toBe(0);
    } finally {
      await d.dispose();
    }
  });
});

describe('a worker started before the control plane (real nats-server, simulated clock)', () => {
  it('the backoff doubles from 250 ms to a 5 s cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map((n) => pullBackoffMs(n))).toEqual([
      250, 500, 1000, 2000, 4000, 5000, 5000, 5000,
    ]);
  });

  it('with no stream yet, six queues sharing slots ask at the backoff’s pace, and say once what they wait for', async () => {
    const prefix = uniquePrefix('early');
    const clock = new SimulatedClock();
    const transport = await createJetStreamTransport({
      insecureNats: true,
      servers: SERVERS,
      prefix,
      timing: TEST_TIMING,
      clock,
    });
    const events: TransportEvent[] = [];
    transport.onEvent((e) => events.push(e));
    // Count the broker's answers to "consumer info" (what each pull attempt first asks).
    let asked = 0;
    const counter = transport.connection.subscribe(`$JS.API.CONSUMER.INFO.${prefix}_dispatch.>`, {
      callback: () => {
        asked++;
      },
    });
    await transport.connection.flush();
    const logger = memoryLogger();
    const off = logTransportEvents(transport, logger, clock);
    const routes = [
      OperationKind.RAW_DATA_PACKAGE,
      OperationKind.DATA_TRANSFER_PACKAGE,
      OperationKind.TRANSFER,
      OperationKind.UNPACK,
      OperationKind.LONG_TERM_ARCHIVE,
      OperationKind.STAGING,
    ].map(defaultRoute);
    const slots = new DeliverySlots(4);
    const subs = routes.map((route) =>
      transport.consume(route, { concurrency: 4, slots }, async (d) => {
        await d.ack();
      }),
    );
    try {
      const waiting = () => events.filter((e) => e.type === 'waiting_for_control_plane').length;
      await waitFor(
        () => waiting() === 6 && clock.pending >= 6,
        'each queue to fail once and back off',
      );
      expect(asked).toBe(6);
      // Time stands still: however many turns the event loop takes, nobody asks again.
      for (let i = 0; i < 500; i++) await new Promise<void>((r) => setImmediate(r));
      await transport.connection.flush();
      expect(asked).toBe(6);
      // Each backoff step lets each queue ask once more: 250, 500, 1000, 2000, 4000, 5000 ms.
      let expected = 6;
      for (const step of [250, 500, 1000, 2000, 4000, 5000, 5000]) {
        await clock.advance(step);
        expected += 6;
        await waitFor(async () => {
          await transport.connection.flush();
          return asked >= expected && clock.pending >= 6;
        }, `the retries after ${step} ms`);
        expect(asked).toBe(expected);
      }
      expect(waiting()).toBe(6); // reported once per queue, not per try
      expect(events.filter((e) => e.type === 'consume_error')).toEqual([]);
      const lines = logger.lines.filter((l) =>
        l.message.startsWith('waiting for the control plane'),
      );
      expect(lines.map((l) => [l.level, l.message])).toEqual([
        ['INFO', `waiting for the control plane to create stream ${prefix}_dispatch`],
      ]);
      // The control plane arrives: the queues find their consumers at the next try.
      await transport.ensure(routes);
      await transport.publish(routes[2] as Route, {
        operationId: 'after',
        kind: OperationKind.TRANSFER,
        operationType: (routes[2] as Route).operationType,
        attempt: 1,
      });
      await clock.advance(5000);
      await waitFor(
        async () =>
          (await transport.unsettled()).length === 0 &&
          (
            await jetstreamManager(transport.connection).then((m) =>
              m.streams.info(`${prefix}_dispatch`),
            )
          ).state.messages === 0,
        'the dispatch to be consumed',
      );
    } finally {
      off();
      counter.unsubscribe();
      await Promise.all(subs.map((s) => s.stop()));
      await transport.destroy();
    }
  });
});
