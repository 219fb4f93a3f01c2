import { afterEach, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultRoute, queueName, type Route } from '../../machines/routing.ts';
import { encodeHeld, heldThatFits, MAX_HEARTBEAT_BYTES } from '../../transport/HeartbeatKey.ts';
import type {
  Delivery,
  DispatchMessage,
  Transport,
  TransportEvent,
  TransportOptions,
  TransportTiming,
} from '../../transport/Transport.ts';
import { gate, observe, waitFor } from './helpers.ts';

/** A transport under test, with a way to put raw bytes on a queue and to clean up. */
export interface Harness {
  readonly transport: Transport;
  publishRaw(route: Route, data: Uint8Array): Promise<void>;
  /** Deletes what the harness created and closes the transport. */
  dispose(): Promise<void>;
}

export type HarnessFactory = (options: TransportOptions) => Promise<Harness>;

/** Small timers in the required order (interval < timeout < floor < ack-wait); ack-wait 1.5 s. */
export const TEST_TIMING: Partial<TransportTiming> = {
  heartbeatIntervalMs: 100,
  heartbeatTimeoutMs: 500,
  reconcilerFloorMs: 800,
  ackWaitMs: 1500,
  maxDeliver: 10,
  duplicateWindowMs: 30_000,
};

const ROUTE = defaultRoute(OperationKind.TRANSFER);
const OTHER_ROUTE = defaultRoute(OperationKind.LONG_TERM_ARCHIVE);

function dispatch(operationId: string, attempt = 1): DispatchMessage {
  return {
    operationId,
    kind: OperationKind.TRANSFER,
    operationType: ROUTE.operationType,
    attempt,
  };
}

/**
 * The transport contract, written once and run against every implementation.
 */
export function transportContract(name: string, factory: HarnessFactory): void {
  describe(`transport contract: ${name}`, () => {
    const harnesses: Harness[] = [];

    async function setup(options: TransportOptions = {}): Promise<Harness> {
      const harness = await factory({
        handlerErrorNakDelayMs: 100,
        ...options,
        timing: { ...TEST_TIMING, ...options.timing },
      });
      harnesses.push(harness);
      await harness.transport.ensure([ROUTE, OTHER_ROUTE]);
      return harness;
    }

    function collect(transport: Transport): TransportEvent[] {
      const events: TransportEvent[] = [];
      transport.onEvent((e) => events.push(e));
      return events;
    }

    afterEach(async () => {
      const leaked = harnesses.filter((h) => h.transport.openSubscriptions > 0).length;
      await Promise.all(harnesses.splice(0).map((h) => h.dispose()));
      if (leaked > 0) throw new Error(`${leaked} transport(s) still had open subscriptions`);
    });

    it('delivers each published message once and the ack removes it', async () => {
      const { transport } = await setup();
      const seen: string[] = [];
      const sub = transport.consume(ROUTE, { concurrency: 4 }, async (d) => {
        seen.push(d.message.operationId);
        expect(d.deliveryCount).toBe(1);
        expect(d.route).toEqual(ROUTE);
        await d.ack();
        await d.ack(); // a second ack of the same delivery is harmless
      });
      for (let i = 0; i < 20; i++) {
        expect(await transport.publish(ROUTE, dispatch(`op-${i}`))).toEqual({ duplicate: false });
      }
      await waitFor(() => seen.length === 20, '20 deliveries');
      await sub.stop();
      expect(new Set(seen).size).toBe(20);
      expect(transport.stats().published).toBe(20);
    });

    it('keeps routes apart: a consumer sees only its own queue', async () => {
      const { transport } = await setup();
      const seen: string[] = [];
      const sub = transport.consume(OTHER_ROUTE, { concurrency: 1 }, async (d) => {
        seen.push(d.message.operationId);
        await d.ack();
      });
      await transport.publish(ROUTE, dispatch('not-mine'));
      await transport.publish(OTHER_ROUTE, {
        operationId: 'mine',
        kind: OperationKind.LONG_TERM_ARCHIVE,
        operationType: OTHER_ROUTE.operationType,
        attempt: 1,
      });
      await waitFor(() => seen.length === 1, 'the other route delivery');
      await sub.stop();
      expect(seen).toEqual(['mine']);
    });

    it('redelivers a held, unsettled message after ack-wait', async () => {
      const { transport } = await setup();
      const hold = gate();
      const deliveries: Delivery[] = [];
      const sub = transport.consume(ROUTE, { concurrency: 2 }, async (d) => {
        deliveries.push(d);
        if (d.deliveryCount === 1) {
          await hold.promise; // neither working() nor ack: the broker takes it back
        }
        await d.ack();
      });
      await transport.publish(ROUTE, dispatch('slow'));
      await waitFor(() => deliveries.length === 2, 'the redelivery');
      expect(deliveries.map((d) => d.deliveryCount)).toEqual([1, 2]);
      expect(deliveries[1]?.message).toEqual(dispatch('slow'));
      hold.open();
      await sub.stop();
    });

    it('unsettled() lists what was handed out and not settled, never what still waits', async () => {
      const { transport } = await setup({ timing: { ackWaitMs: 30_000 } });
      const hold = gate();
      const held: Delivery[] = [];
      const sub = transport.consume(ROUTE, { concurrency: 1 }, async (d) => {
        held.push(d);
        await hold.promise;
        await d.ack();
      });
      await transport.publish(ROUTE, dispatch('out'));
      await transport.publish(ROUTE, dispatch('queued'));
      await waitFor(() => held.length === 1, 'the first delivery');
      expect(await transport.unsettled()).toEqual([dispatch('out')]);
      hold.open();
      await waitFor(() => held.length === 2, 'the second delivery');
      await waitFor(
        async () => JSON.stringify(await transport.unsettled()) === JSON.stringify([]),
        'both settled',
      );
      await sub.stop();
    });

    it('waiting() finds the dispatches asked about that their queue has not handed out yet', async () => {
      const { transport } = await setup({ timing: { ackWaitMs: 30_000 } });
      const hold = gate();
      const held: Delivery[] = [];
      const sub = transport.consume(ROUTE, { concurrency: 1 }, async (d) => {
        held.push(d);
        await hold.promise;
        await d.ack();
      });
      await transport.publish(ROUTE, dispatch('out'));
      await transport.publish(ROUTE, dispatch('queued'));
      await transport.publish(ROUTE, dispatch('later', 2));
      const other = { ...dispatch('other'), operationType: OTHER_ROUTE.operationType };
      await transport.publish(OTHER_ROUTE, { ...other, kind: OperationKind.LONG_TERM_ARCHIVE });
      await waitFor(() => held.length === 1, 'the first delivery');
      const wanted = new Map([
        ['out', 1],
        ['queued', 1],
        ['later', 1],
        ['other', 1],
        ['absent', 1],
      ]);
      const first = await transport.waiting(wanted);
      expect(first.complete).toBe(true);
      const found = [...first.found].sort((a, b) =>
        a.message.operationId.localeCompare(b.message.operationId),
      );
      expect(found).toEqual([
        {
          message: { ...other, kind: OperationKind.LONG_TERM_ARCHIVE },
          queue: queueName(OTHER_ROUTE),
        },
        { message: dispatch('queued'), queue: queueName(ROUTE) },
      ]);
      expect((await transport.waiting(new Map())).found).toEqual([]);
      hold.open();
      await waitFor(() => held.length === 3, 'the queue drained');
      await waitFor(
        async () => (await transport.waiting(wanted)).found.length === 1,
        'only the unread queue still waiting',
      );
      await sub.stop();
    });

    it('working() keeps a message held past ack-wait without redelivery', async () => {
      const { transport } = await setup();
      const timing = transport.timing;
      let deliveries = 0;
      let finished = false;
      const sub = transport.consume(ROUTE, { concurrency: 2 }, async (d) => {
        deliveries++;
        // Hold for three ack-waits, calling working() at the heartbeat interval.
        const until = Date.now() + 3 * timing.ackWaitMs;
        while (Date.now() < until) {
          d.working();
          await observe(timing.heartbeatIntervalMs);
        }
        await d.ack();
        finished = true;
      });
      await transport.publish(ROUTE, dispatch('long'));
      await waitFor(() => finished, 'the long handler');
      await observe(timing.ackWaitMs); // and nothing comes back after the ack either
      await sub.stop();
      expect(deliveries).toBe(1);
    });

    it('nak(delay) redelivers the same message with a higher delivery count', async () => {
      const { transport } = await setup();
      const counts: number[] = [];
      const sub = transport.consume(ROUTE, { concurrency: 1 }, async (d) => {
        counts.push(d.deliveryCount);
        if (d.deliveryCount < 3) d.nak(d.deliveryCount === 1 ? 200 : 0);
        else await d.ack();
      });
      await transport.publish(ROUTE, dispatch('retry'));
      await waitFor(() => counts.length === 3, 'three deliveries');
      await sub.stop();
      expect(counts).toEqual([1, 2, 3]);
    });

    it('drops a second publish of the same attempt, but not a new attempt', async () => {
      const { transport } = await setup();
      expect(await transport.publish(ROUTE, dispatch('dup', 1))).toEqual({ duplicate: false });
      expect(await transport.publish(ROUTE, dispatch('dup', 1))).toEqual({ duplicate: true });
      expect(await transport.publish(ROUTE, dispatch('dup', 2))).toEqual({ duplicate: false });
      const seen: number[] = [];
      const sub = transport.consume(ROUTE, { concurrency: 2 }, async (d) => {
        seen.push(d.message.attempt);
        await d.ack();
      });
      await waitFor(() => seen.length === 2, 'two attempts');
      // Re-publishing an attempt already consumed is still a duplicate inside the window.
      expect(await transport.publish(ROUTE, dispatch('dup', 1))).toEqual({ duplicate: true });
      await transport.publish(ROUTE, dispatch('sentinel'));
      await waitFor(() => seen.length === 3, 'the sentinel');
      await sub.stop();
      expect(seen.sort()).toEqual([1, 1, 2]);
      expect(transport.stats()).toMatchObject({ published: 3, duplicates: 2 });
    });

    it('term() stops delivery for good', async () => {
      const { transport } = await setup();
      const seen: string[] = [];
      const sub = transport.consume(ROUTE, { concurrency: 1 }, async (d) => {
        seen.push(d.message.operationId);
        if (d.message.operationId === 'stale') d.term();
        else await d.ack();
      });
      await transport.publish(ROUTE, dispatch('stale'));
      await waitFor(() => seen.includes('stale'), 'the stale delivery');
      await observe(2 * transport.timing.ackWaitMs);
      await transport.publish(ROUTE, dispatch('after'));
      await waitFor(() => seen.includes('after'), 'the next message');
      await sub.stop();
      expect(seen).toEqual(['stale', 'after']);
    });

    it('gives a message up after maxDeliver deliveries, reports it, and keeps the queue moving', async () => {
      const { transport } = await setup({ timing: { maxDeliver: 2 } });
      const events = collect(transport);
      const counts: number[] = [];
      const fine: string[] = [];
      const sub = transport.consume(ROUTE, { concurrency: 1 }, async (d) => {
        if (d.message.operationId === 'doomed') {
          counts.push(d.deliveryCount);
          d.nak();
        } else {
          fine.push(d.message.operationId);
          await d.ack();
        }
      });
      await transport.publish(ROUTE, dispatch('doomed'));
      await waitFor(() => events.some((e) => e.type === 'max_deliveries'), 'max_deliveries');
      expect(events.find((e) => e.type === 'max_deliveries')).toMatchObject({
        route: ROUTE,
        message: dispatch('doomed'),
      });
      await transport.publish(ROUTE, dispatch('fine'));
      await waitFor(() => fine.length === 1, 'the next message');
      await observe(transport.timing.ackWaitMs); // the given-up message never comes back
      await sub.stop();
      expect(counts).toEqual([1, 2]);
      expect(transport.stats().maxDeliveries).toBe(1);
    });

    it('a handler that throws gets its delivery nak()ed and reported, later each time', async () => {
      const { transport } = await setup();
      const events = collect(transport);
      const counts: number[] = [];
      const receivedAt: number[] = [];
      const sub = transport.consume(ROUTE, { concurrency: 1 }, async (d) => {
        counts.push(d.deliveryCount);
        receivedAt.push(performance.now());
        if (d.deliveryCount === 1 || d.deliveryCount === 3) throw new Error('boom');
        if (d.deliveryCount === 2) return; // forgets to settle
        await d.ack();
      });
      await transport.publish(ROUTE, dispatch('flaky'));
      await waitFor(() => counts.length === 4, 'four deliveries');
      await sub.stop();
      expect(counts).toEqual([1, 2, 3, 4]);
      const errors = events.filter((e) => e.type === 'handler_error');
      expect(errors).toHaveLength(3);
      expect(errors[1]).toMatchObject({ error: { code: OpstateErrorCode.TRANSPORT } });
      // The nak delay (100 ms here) doubles per failed delivery, and no delivery comes early.
      expect(errors.map((e) => e.retryInMs)).toEqual([100, 200, 400]);
      const gaps = receivedAt.slice(1).map((t, i) => t - (receivedAt[i] as number));
      for (const [i, gap] of gaps.entries()) {
        expect(gap).toBeGreaterThanOrEqual((errors[i]?.retryInMs ?? 0) - 5);
      }
    });

    it('two consumers on one queue never hold the same message at once', async () => {
      const { transport } = await setup();
      const held = new Set<string>();
      const done = new Set<string>();
      let overlaps = 0;
      let maxHeld = 0;
      const handler = () => {
        let unsettled = 0;
        return async (d: Delivery) => {
          const id = d.message.operationId;
          if (held.has(id)) overlaps++;
          held.add(id);
          unsettled++;
          maxHeld = Math.max(maxHeld, unsettled);
          await observe(Math.floor(Math.random() * 20));
          held.delete(id);
          done.add(id);
          unsettled--;
          await d.ack();
        };
      };
      const a = transport.consume(ROUTE, { concurrency: 3 }, handler());
      const b = transport.consume(ROUTE, { concurrency: 3 }, handler());
      const results = await transport.publishMany(
        Array.from({ length: 60 }, (_, i) => ({ route: ROUTE, message: dispatch(`m-${i}`) })),
      );
      expect(results.every((r) => r.ok && !r.duplicate)).toBe(true);
      await waitFor(() => done.size === 60, 'all 60 handled');
      await Promise.all([a.stop(), b.stop()]);
      expect(overlaps).toBe(0);
      expect(maxHeld).toBeLessThanOrEqual(3);
    });

    it('a poison message (bad JSON, wrong shape, oversized) is terminated, reported, and does not stop the queue', async () => {
      const h = await setup({ maxMessageBytes: 512 });
      const events = collect(h.transport);
      const seen: string[] = [];
      const sub = h.transport.consume(ROUTE, { concurrency: 1 }, async (d) => {
        seen.push(d.message.operationId);
        await d.ack();
      });
      const enc = new TextEncoder();
      await h.publishRaw(ROUTE, enc.encode('{not json'));
      await h.publishRaw(ROUTE, enc.encode(JSON.stringify({ operationId: 'x', attempt: 'one' })));
      await h.publishRaw(
        ROUTE,
        enc.encode(JSON.stringify({ ...dispatch('big'), padding: 'x'.repeat(2000) })),
      );
      await h.publishRaw(ROUTE, new Uint8Array([0xff, 0xfe, 0xfd]));
      await h.transport.publish(ROUTE, dispatch('good'));
      await waitFor(() => seen.includes('good'), 'the good message');
      await observe(h.transport.timing.ackWaitMs); // terminated, so none of them comes back
      await sub.stop();
      expect(seen).toEqual(['good']);
      const rejected = events.filter((e) => e.type === 'rejected');
      expect(rejected).toHaveLength(4);
      expect(rejected.map((e) => (e.type === 'rejected' ? e.reason.split(':')[0] : ''))).toEqual([
        'not JSON',
        'wrong shape',
        'oversized',
        'not JSON',
      ]);
      expect(h.transport.stats().rejected).toBe(4);
    });

    it('refuses to publish an invalid message with BAD_INPUT', async () => {
      const { transport } = await setup();
      const bad = { ...dispatch('x'), attempt: 0 };
      await expect(transport.publish(ROUTE, bad)).rejects.toMatchObject({
        code: OpstateErrorCode.BAD_INPUT,
      });
      const [r] = await transport.publishMany([{ route: ROUTE, message: dispatch('a.b') }]);
      expect(r?.ok).toBe(false);
    });

    it('stop() waits for running handlers and is idempotent', async () => {
      const { transport } = await setup();
      const hold = gate();
      let started = false;
      let acked = false;
      const sub = transport.consume(ROUTE, { concurrency: 2 }, async (d) => {
        started = true;
        await hold.promise;
        await d.ack();
        acked = true;
      });
      await transport.publish(ROUTE, dispatch('inflight'));
      await waitFor(() => started, 'the handler to start');
      expect(sub.inFlight).toBe(1);
      const stopping = sub.stop();
      expect(sub.stop()).toBe(stopping);
      hold.open();
      await stopping;
      await sub.closed;
      expect(acked).toBe(true);
      expect(transport.openSubscriptions).toBe(0);
    });

    it('worker heartbeats list what each worker holds, alive while fresh, dead once older than the timeout, and removable', async () => {
      const { transport } = await setup();
      const hb = transport.heartbeats;
      const a = { kind: OperationKind.TRANSFER, operationId: 'op-hb', attempt: 2 };
      const b = { kind: OperationKind.UNPACK, operationId: 'op-hb2', attempt: 1 };
      await hb.beat('worker-1', [a]);
      await hb.beat('worker-2', [b]);
      expect(await hb.isAlive(OperationKind.TRANSFER, 'op-hb')).toBe(true);
      expect(await hb.isAlive(OperationKind.TRANSFER, 'op-hb', 2)).toBe(true);
      expect(await hb.isAlive(OperationKind.TRANSFER, 'op-hb', 1)).toBe(false);
      expect(await hb.isAlive(OperationKind.UNPACK, 'op-hb')).toBe(false);
      expect(await hb.isAlive(OperationKind.TRANSFER, 'op-none')).toBe(false);
      const listed = await hb.list();
      expect(
        listed
          .map((h) => ({ workerId: h.workerId, held: h.held }))
          .sort((x, y) => x.workerId.localeCompare(y.workerId)),
      ).toEqual([
        { workerId: 'worker-1', held: [a] },
        { workerId: 'worker-2', held: [b] },
      ]);
      expect(listed.every((h) => typeof h.at === 'number' && h.at > 0)).toBe(true);
      // The next beat replaces what the worker held: a released operation is no longer listed.
      await hb.beat('worker-2', []);
      expect(await hb.isAlive(OperationKind.UNPACK, 'op-hb2')).toBe(false);
      await hb.remove('worker-2');
      expect((await hb.list()).map((h) => h.workerId)).toEqual(['worker-1']);
      await hb.remove('worker-2'); // removing again is harmless
      // No refresh: the heartbeat goes stale after the timeout.
      await waitFor(
        async () => !(await hb.isAlive(OperationKind.TRANSFER, 'op-hb')),
        'the heartbeat to go stale',
      );
      // A refresh brings it back.
      await hb.beat('worker-1', [a]);
      expect(await hb.isAlive(OperationKind.TRANSFER, 'op-hb', 2)).toBe(true);
      // Past the bucket's age limit the key is gone from the store.
      await waitFor(async () => (await hb.list()).length === 0, 'the key to age out');
    });

    it('counts only the recorded holder’s heartbeat when asked about a started operation', async () => {
      const { transport } = await setup();
      const hb = transport.heartbeats;
      const x = { kind: OperationKind.TRANSFER, operationId: 'op-held', attempt: 1 };
      await hb.beat('worker-b', [x], 'instance-b');
      await hb.beat('worker-a', [x], 'instance-a');
      expect(await hb.isAlive(x.kind, x.operationId, 1, { holder: 'worker-b' })).toBe(true);
      // worker-b stops beating; worker-a keeps listing worker-b's operation.
      await waitFor(async () => {
        await hb.beat('worker-a', [x], 'instance-a');
        return !(await hb.isAlive(x.kind, x.operationId, 1, { holder: 'worker-b' }));
      }, 'worker-b’s heartbeat to go stale');
      expect(await hb.isAlive(x.kind, x.operationId, 1)).toBe(true); // worker-a’s listing, alone
      expect(await hb.isAlive(x.kind, x.operationId, 1, { holder: 'worker-a' })).toBe(true);
    });

    it('a worker id is claimed by one live instance: a second is refused with CONFIG naming it', async () => {
      const { transport } = await setup();
      const hb = transport.heartbeats;
      // The claim's first beat already says which queues the worker reads.
      const reads = { queues: ['source_data_transfer'], kinds: [OperationKind.TRANSFER] };
      await hb.claim('worker-dup', 'first', reads);
      expect((await hb.list()).find((b) => b.workerId === 'worker-dup')).toMatchObject({
        instance: 'first',
        held: [],
        reads,
      });
      const second = hb.claim('worker-dup', 'second');
      await expect(second).rejects.toMatchObject({ code: OpstateErrorCode.CONFIG });
      await expect(second).rejects.toThrow(/Worker id "worker-dup" is in use/);
      await hb.claim('worker-dup', 'first'); // the same instance again: its own
      // The first stops beating: once its heartbeat is stale, the id is free again.
      await waitFor(
        async () =>
          hb.claim('worker-dup', 'second').then(
            () => true,
            () => false,
          ),
        'the first instance’s heartbeat to go stale',
      );
      expect((await hb.list()).find((b) => b.workerId === 'worker-dup')?.instance).toBe('second');
    });

    it('never writes a heartbeat over the size cap', async () => {
      const { transport } = await setup();
      const many = Array.from({ length: Math.ceil(MAX_HEARTBEAT_BYTES / 40) }, (_, i) => ({
        kind: OperationKind.LONG_TERM_ARCHIVE,
        operationId: `operation-with-a-rather-long-id-${String(i).padStart(6, '0')}`,
        attempt: 1,
      }));
      const fits = heldThatFits(many, 'n');
      expect(fits).toBeGreaterThan(0);
      expect(fits).toBeLessThan(many.length);
      const over = transport.heartbeats.beat('worker-big', many, 'n');
      await expect(over).rejects.toMatchObject({ code: OpstateErrorCode.BAD_INPUT });
      await expect(over).rejects.toThrow(new RegExp(`over the ${MAX_HEARTBEAT_BYTES}-byte cap`));
      await transport.heartbeats.beat('worker-big', many.slice(0, fits), 'n');
      const [big] = (await transport.heartbeats.list()).filter((b) => b.workerId === 'worker-big');
      expect(big?.held.length).toBe(fits);
      expect(encodeHeld(many.slice(0, fits), 'n').length).toBeLessThanOrEqual(MAX_HEARTBEAT_BYTES);
      expect(() => encodeHeld(many.slice(0, fits + 1), 'n')).toThrow(
        new RegExp(`over the ${MAX_HEARTBEAT_BYTES}-byte cap`),
      );
    });

    it('refuses a worker id or an operation id that is not key-safe', async () => {
      const { transport } = await setup();
      await expect(transport.heartbeats.beat('a.b', [])).rejects.toBeInstanceOf(OpstateError);
      await expect(
        transport.heartbeats.beat('w', [
          { kind: OperationKind.TRANSFER, operationId: 'a.b', attempt: 1 },
        ]),
      ).rejects.toBeInstanceOf(OpstateError);
      // A queue list that names no queue: refused before anything is written.
      const badReads = transport.heartbeats.beat('w-reads', [], 'n', {
        queues: ['source data/transfer'],
        kinds: [OperationKind.TRANSFER],
      });
      await expect(badReads).rejects.toMatchObject({ code: OpstateErrorCode.BAD_INPUT });
      expect((await transport.heartbeats.list()).map((b) => b.workerId)).not.toContain('w-reads');
    });

    it('refuses timers out of order with CONFIG naming the values', async () => {
      const attempt = factory({
        timing: { ...TEST_TIMING, reconcilerFloorMs: 2000, ackWaitMs: 1500 },
      });
      await expect(attempt).rejects.toMatchObject({ code: OpstateErrorCode.CONFIG });
      await expect(attempt).rejects.toThrow(
        /reconcilerFloorMs \(2000\) is not below ackWaitMs \(1500\)/,
      );
    });
  });
}
