import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import {
  defaultRoute,
  LocationType,
  OperationType,
  queueName,
  queueSubject,
  type Route,
  siteRoute,
} from '../../machines/routing.ts';
import { createJetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import type { JetStreamSubscription } from '../../transport/jetstream/JetStreamSubscription.ts';
import { reachable, uniquePrefix, waitFor } from './helpers.ts';
import { TEST_TIMING, transportContract } from './transportContract.ts';

const NATS_PORT = 4222;
const up = await reachable(NATS_PORT);

// The suite needs the real server: an unreachable one fails the run, it is never skipped.
if (!up) {
  describe('transport contract: JetStream', () => {
    it('needs nats-server with JetStream at 127.0.0.1:4222', () => {
      throw new Error(`NATS is unreachable at 127.0.0.1:${NATS_PORT}: start nats-server -js`);
    });
  });
}

transportContract('JetStream', async (options) => {
  const prefix = uniquePrefix('js');
  const transport = await createJetStreamTransport({
    insecureNats: true,
    ...options,
    servers: `nats://127.0.0.1:${NATS_PORT}`,
    prefix,
    pullExpiresMs: 1000,
  });
  const raw = jetstream(transport.connection);
  return {
    transport,
    publishRaw: async (route, data) => {
      await raw.publish(queueSubject(prefix, route), data);
    },
    dispose: () => transport.destroy(),
  };
});

describe('JetStream transport on a caller-owned connection', () => {
  it('closes without waiting for the connection, which stays open for its owner', async () => {
    const nc = await connect({ servers: `nats://127.0.0.1:${NATS_PORT}` });
    try {
      const transport = await createJetStreamTransport({
        insecureNats: true,
        connection: nc,
        prefix: uniquePrefix('own'),
      });
      await transport.ensure([]);
      const closed = await Promise.race([
        transport.close().then(() => 'closed' as const),
        new Promise<'hung'>((r) => setTimeout(() => r('hung'), 10_000)),
      ]);
      expect(closed).toBe('closed');
      expect(nc.isClosed()).toBe(false);
      await nc.flush(); // still usable by its owner
    } finally {
      await nc.close();
    }
  });
});

describe('JetStream pull requests ended early by the client', () => {
  it('a pull request the client gave up on does not swallow the next dispatch: the broker skips an inbox no one listens on', async () => {
    // ack-wait far beyond the test: a swallowed dispatch would not come back in time.
    const prefix = uniquePrefix('early');
    const transport = await createJetStreamTransport({
      insecureNats: true,
      servers: `nats://127.0.0.1:${NATS_PORT}`,
      prefix,
      timing: { ...TEST_TIMING, ackWaitMs: 60_000 },
      pullExpiresMs: 30_000,
    });
    try {
      const route = defaultRoute(OperationKind.TRANSFER);
      await transport.ensure([route]);
      const jsm = await jetstreamManager(transport.connection);
      const info = () => jsm.consumers.info(`${prefix}_dispatch`, queueName(route));
      const seen: string[] = [];
      const sub = transport.consume(route, { concurrency: 1 }, async (d) => {
        seen.push(d.message.operationId);
        await d.ack();
      }) as JetStreamSubscription;
      await waitFor(async () => (await info()).num_waiting === 1, 'the open pull request');
      // The client ends its request (as on a disconnect) while the broker would still hold it for
      // 30 s, serving the oldest request first; the subscription opens a new one at once.
      sub.abortPulls();
      await waitFor(async () => (await info()).num_waiting === 1, 'the new pull request');
      await transport.publish(route, {
        operationId: 'after',
        kind: OperationKind.TRANSFER,
        operationType: route.operationType,
        attempt: 1,
      });
      await waitFor(() => seen.includes('after'), 'the dispatch, well before ack-wait', 10_000);
      await sub.stop();
    } finally {
      await transport.destroy();
    }
  });
});

describe('JetStream queues sharing one bound (a worker serving several kinds)', () => {
  it('queues that stay empty probe one message at a time, so a busy one gets every other slot at once', async () => {
    const transport = await createJetStreamTransport({
      insecureNats: true,
      servers: `nats://127.0.0.1:${NATS_PORT}`,
      prefix: uniquePrefix('share'),
      // Longer than the test: a pull that was opened too large is not given back by its expiry.
      pullExpiresMs: 120_000,
    });
    try {
      const { DeliverySlots } = await import('../../transport/DeliverySlots.ts');
      const routes = [
        OperationKind.RAW_DATA_PACKAGE,
        OperationKind.DATA_TRANSFER_PACKAGE,
        OperationKind.TRANSFER,
        OperationKind.UNPACK,
        OperationKind.LONG_TERM_ARCHIVE,
        OperationKind.STAGING,
      ].map(defaultRoute);
      await transport.ensure(routes);
      const slots = new DeliverySlots(12);
      const busy = defaultRoute(OperationKind.TRANSFER);
      // Each handler keeps its delivery (and its slot) until the test lets it go.
      const held: (() => Promise<void>)[] = [];
      let mostHeld = 0;
      const subs = routes.map((route) =>
        transport.consume(route, { concurrency: 12, slots }, async (d) => {
          await new Promise<void>((release) => {
            held.push(async () => {
              await d.ack();
              release();
            });
            mostHeld = Math.max(mostHeld, slots.held);
          });
        }),
      );
      await transport.publishMany(
        Array.from({ length: 14 }, (_, i) => ({
          route: busy,
          message: {
            operationId: `busy-${i}`,
            kind: OperationKind.TRANSFER,
            operationType: busy.operationType,
            attempt: 1,
          },
        })),
      );
      // Five empty queues hold one probe each; the busy queue gets the other seven. A share of
      // twelve split six ways would have stopped it at two until the empty queues' pulls expired.
      await waitFor(() => held.length === 7, 'the busy queue to hold all but five slots', 20_000);
      expect(mostHeld).toBeLessThanOrEqual(12);
      expect(slots.held + slots.free).toBeLessThanOrEqual(12);
      for (const release of held.splice(0)) await release();
      await waitFor(() => held.length === 7, 'the freed slots to go to the busy queue again');
      for (const release of held.splice(0)) await release();
      await Promise.all(subs.map((s) => s.stop()));
    } finally {
      await transport.destroy();
    }
  });
});

describe('JetStream: many queues, few slots (a worker started without --site)', () => {
  it('an idle queue asks its consumer instead of holding a slot, so one message on one of 72 queues is pulled within about one round', async () => {
    const prefix = uniquePrefix('many');
    const transport = await createJetStreamTransport({
      insecureNats: true,
      servers: `nats://127.0.0.1:${NATS_PORT}`,
      prefix,
    });
    // Counts what every consumer is asked, as the server sees it: pulls and consumer-info looks.
    const spy = await connect({ servers: `nats://127.0.0.1:${NATS_PORT}` });
    const asked = { pulls: new Map<string, number>(), looks: new Map<string, number>() };
    const count = (into: Map<string, number>) => (_: unknown, msg: { subject: string }) => {
      const consumer = msg.subject.split('.').at(-1) as string;
      into.set(consumer, (into.get(consumer) ?? 0) + 1);
    };
    spy.subscribe('$JS.API.CONSUMER.MSG.NEXT.>', { callback: count(asked.pulls) });
    spy.subscribe('$JS.API.CONSUMER.INFO.>', { callback: count(asked.looks) });
    await spy.flush();
    try {
      const { DeliverySlots } = await import('../../transport/DeliverySlots.ts');
      const routes = Array.from({ length: 72 }, (_, i) =>
        siteRoute(OperationType.LONG_TERM_ARCHIVE_TRANSFER, {
          site: 'far',
          name: `lta${i}`,
          locationType: LocationType.LONG_TERM_ARCHIVE,
        }),
      );
      await transport.ensure(routes);
      const slots = new DeliverySlots(2);
      const delivered: string[] = [];
      const subs = routes.map((route) =>
        transport.consume(route, { concurrency: 2, slots }, async (d) => {
          delivered.push(queueName(d.route));
          await d.ack();
        }),
      );
      // Every queue has looked its consumer up: the worker is past its start (before idle queues
      // asked their consumers, that took a pull of each, one turn after another).
      await waitFor(
        () => routes.every((r) => (asked.looks.get(queueName(r)) ?? 0) >= 1),
        'every queue to look its consumer up',
        60_000,
      );
      const target = routes[53] as Route;
      const snapshot = (m: Map<string, number>) => new Map(m);
      const pullsBefore = snapshot(asked.pulls);
      const looksBefore = snapshot(asked.looks);
      await transport.publishMany([
        {
          route: target,
          message: {
            operationId: 'one',
            kind: OperationKind.LONG_TERM_ARCHIVE,
            operationType: target.operationType,
            attempt: 1,
          },
        },
      ]);
      await waitFor(() => delivered.length === 1, 'the one message to be delivered', 60_000);
      const since = (m: Map<string, number>, before: Map<string, number>, q: string) =>
        (m.get(q) ?? 0) - (before.get(q) ?? 0);
      const emptyQueuePulls = routes
        .filter((r) => r !== target)
        .reduce((n, r) => n + since(asked.pulls, pullsBefore, queueName(r)), 0);
      expect(delivered).toEqual([queueName(target)]);
      // The empty queues held no slot in a pull while the message waited; turn-taking among 72
      // queues with 2 slots pulled dozens of them, one second each, before reaching it.
      expect(emptyQueuePulls).toBeLessThanOrEqual(2);
      // The target's queue saw it at its first or second look after the publish: one round.
      expect(since(asked.looks, looksBefore, queueName(target))).toBeLessThanOrEqual(2);
      // It came through a pull of its own queue: one issued after the publish, or one the queue
      // already had open when the message arrived (on a busy machine its turn can fall just
      // before the publish), so every pull of it counts here.
      expect(asked.pulls.get(queueName(target)) ?? 0).toBeGreaterThanOrEqual(1);
      await Promise.all(subs.map((s) => s.stop()));
    } finally {
      await spy.close();
      await transport.destroy();
    }
  }, 120_000);
});
