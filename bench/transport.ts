/**
 * Transport figures: one JSON object per line, `{"name","value","unit"}`, plus
 * `"baseline"` and `"ratio"` when a figure is compared with the raw @nats-io client measured in
 * the same run on the same stream settings and message size. Never asserts.
 *
 *   node --import tsx bench/transport.ts            # needs nats-server -js at 127.0.0.1:4222
 *   NATS_URL=nats://host:4222 node --import tsx bench/transport.ts
 */
import { jetstream } from '@nats-io/jetstream';
import { OperationKind } from '../machines/OperationKind.ts';
import { defaultRoute } from '../machines/routing.ts';
import { encodeDispatch } from '../transport/DispatchMessage.ts';
import { createInProcessTransport } from '../transport/inprocess/createInProcessTransport.ts';
import {
  createJetStreamTransport,
  type JetStreamTransport,
} from '../transport/jetstream/createJetStreamTransport.ts';
import type { DispatchMessage, Transport } from '../transport/Transport.ts';

const SERVERS = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const ROUTE = defaultRoute(OperationKind.TRANSFER);
const RUN = `b${process.pid}_${Date.now().toString(36)}`;
const ASYNC_COUNT = Number(process.env.BENCH_MESSAGES ?? 20_000);
const SYNC_SECONDS = 2;
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);

function message(i: number, attempt = 1): DispatchMessage {
  return {
    operationId: `${RUN}-${String(i).padStart(8, '0')}`,
    kind: OperationKind.TRANSFER,
    operationType: ROUTE.operationType,
    attempt,
  };
}

function emit(
  name: string,
  value: number,
  unit: string,
  baseline?: { name: string; value: number },
) {
  const line: Record<string, unknown> = { name, value: Math.round(value), unit };
  if (baseline) {
    line.baseline = { name: baseline.name, value: Math.round(baseline.value), unit };
    line.ratio = Number((value / baseline.value).toFixed(3));
  }
  console.log(JSON.stringify(line));
}

async function timed(fn: () => Promise<number>): Promise<number> {
  const start = performance.now();
  const n = await fn();
  return n / ((performance.now() - start) / 1000);
}

async function jsTransport(tag: string, confirmAcks = false): Promise<JetStreamTransport> {
  const t = await createJetStreamTransport({
    insecureNats: true,
    servers: SERVERS,
    prefix: `${RUN}_${tag}`,
    confirmAcks,
    maxAckPending: 10_000,
  });
  await t.ensure([ROUTE]);
  return t;
}

/** Ours: publishMany (pipelined, window 1000). */
async function oursPublishMany(t: Transport, offset: number): Promise<number> {
  return timed(async () => {
    const items = Array.from({ length: ASYNC_COUNT }, (_, i) => ({
      route: ROUTE,
      message: message(offset + i),
    }));
    const results = await t.publishMany(items);
    if (results.some((r) => !r.ok)) throw new Error('publish failed');
    return ASYNC_COUNT;
  });
}

/** Raw: js.publish with msgID, 1000 in flight. */
async function rawPublishAsync(t: JetStreamTransport, offset: number): Promise<number> {
  const js = jetstream(t.connection);
  const subject = `${RUN}_raw.dispatch.${ROUTE.locationType}.${ROUTE.operationType}`;
  return timed(async () => {
    let next = 0;
    const lane = async () => {
      while (next < ASYNC_COUNT) {
        const m = message(offset + next++);
        await js.publish(subject, encodeDispatch(m), { msgID: `${m.operationId}:${m.attempt}` });
      }
    };
    await Promise.all(Array.from({ length: 1000 }, lane));
    return ASYNC_COUNT;
  });
}

async function forDuration(seconds: number, step: (i: number) => Promise<void>): Promise<number> {
  const end = performance.now() + seconds * 1000;
  let i = 0;
  while (performance.now() < end) await step(i++);
  return i;
}

async function oursPublishAwaited(t: Transport, offset: number): Promise<number> {
  return timed(() =>
    forDuration(SYNC_SECONDS, async (i) => {
      await t.publish(ROUTE, message(offset + i));
    }),
  );
}

async function rawPublishAwaited(t: JetStreamTransport, offset: number): Promise<number> {
  const js = jetstream(t.connection);
  const subject = `${RUN}_raw.dispatch.${ROUTE.locationType}.${ROUTE.operationType}`;
  return timed(() =>
    forDuration(SYNC_SECONDS, async (i) => {
      const m = message(offset + i);
      await js.publish(subject, encodeDispatch(m), { msgID: `${m.operationId}:${m.attempt}` });
    }),
  );
}

/** Ours: consume(concurrency 64) + ack() until `count` are handled. */
async function oursConsume(t: Transport, count: number): Promise<number> {
  let done = 0;
  let finish!: () => void;
  const finished = new Promise<void>((r) => {
    finish = r;
  });
  const start = performance.now();
  const sub = t.consume(ROUTE, { concurrency: CONCURRENCY }, async (d) => {
    await d.ack();
    if (++done === count) finish();
  });
  await finished;
  const rate = count / ((performance.now() - start) / 1000);
  await sub.stop();
  return rate;
}

/** Raw: consume({max_messages: 256}) + ack() until `count` are handled. */
async function rawConsume(t: JetStreamTransport, count: number): Promise<number> {
  const js = jetstream(t.connection);
  const consumer = await js.consumers.get(
    `${RUN}_raw_dispatch`,
    `${ROUTE.locationType}_${ROUTE.operationType}`,
  );
  const start = performance.now();
  const messages = await consumer.consume({ max_messages: 256 });
  let done = 0;
  for await (const m of messages) {
    m.ack();
    if (++done === count) break;
  }
  await messages.close();
  return count / ((performance.now() - start) / 1000);
}

async function main(): Promise<void> {
  const ours = await jsTransport('ours');
  const raw = await jsTransport('raw');
  const confirmed = await jsTransport('confirmed', true);
  try {
    const rawAsync = await rawPublishAsync(raw, 0);
    const oursAsync = await oursPublishMany(ours, 0);
    emit('transport.jetstream.publish_many', oursAsync, 'msg/s', {
      name: 'nats.raw.publish_async_window_1000',
      value: rawAsync,
    });
    const rawSync = await rawPublishAwaited(raw, ASYNC_COUNT);
    const oursSync = await oursPublishAwaited(ours, ASYNC_COUNT);
    emit('transport.jetstream.publish_awaited', oursSync, 'msg/s', {
      name: 'nats.raw.publish_awaited',
      value: rawSync,
    });
    // Consume what was published: the raw stream holds the same number as ours.
    const rawRate = await rawConsume(raw, ASYNC_COUNT);
    const oursRate = await oursConsume(ours, ASYNC_COUNT);
    emit('transport.jetstream.consume_ack', oursRate, 'msg/s', {
      name: 'nats.raw.consume_256_ack',
      value: rawRate,
    });
    await oursPublishMany(confirmed, 0);
    const confirmedRate = await oursConsume(confirmed, ASYNC_COUNT);
    emit('transport.jetstream.consume_ack_confirmed', confirmedRate, 'msg/s', {
      name: 'nats.raw.consume_256_ack',
      value: rawRate,
    });

    const inproc = createInProcessTransport();
    const inPub = await oursPublishMany(inproc, 0);
    const inCons = await oursConsume(inproc, ASYNC_COUNT);
    emit('transport.inprocess.publish_many', inPub, 'msg/s', {
      name: 'transport.jetstream.publish_many',
      value: oursAsync,
    });
    emit('transport.inprocess.consume_ack', inCons, 'msg/s', {
      name: 'transport.jetstream.consume_ack',
      value: oursRate,
    });
    await inproc.close();
  } finally {
    await Promise.all([ours.destroy(), raw.destroy(), confirmed.destroy()]);
  }
}

await main();
