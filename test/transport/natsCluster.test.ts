import { createServer } from 'node:net';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultRoute } from '../../machines/routing.ts';
import { createJetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { replicasToApply, streamReplicas } from '../../transport/jetstream/streamReplicas.ts';
import { transportNames } from '../../transport/TransportNames.ts';
import { NatsClusterProcess } from '../helpers/privateServers.ts';
import { uniquePrefix } from './helpers.ts';
import { TEST_TIMING } from './transportContract.ts';

const ROUTE = defaultRoute(OperationKind.TRANSFER);
const THREE = ['127.0.0.1:1', '127.0.0.1:2', '127.0.0.1:3'];

describe('the replica count', () => {
  it.each([
    ['a single server', undefined, {}, { replicas: 1, chosen: false }],
    [
      'a cluster of three',
      undefined,
      { cluster: 'c', connect_urls: THREE },
      { replicas: 3, chosen: false },
    ],
    [
      'a cluster of five',
      undefined,
      { cluster: 'c', connect_urls: [...THREE, 'h:4', 'h:5'] },
      { replicas: 3, chosen: false },
    ],
    [
      'a cluster of two',
      undefined,
      { cluster: 'c', connect_urls: THREE.slice(0, 2) },
      { replicas: 1, chosen: false },
    ],
    [
      'a cluster that does not advertise',
      undefined,
      { cluster: 'c' },
      { replicas: 1, chosen: false },
    ],
    [
      'URLs without a cluster name',
      undefined,
      { connect_urls: THREE },
      { replicas: 1, chosen: false },
    ],
    ['a chosen count', 2, { cluster: 'c', connect_urls: THREE }, { replicas: 2, chosen: true }],
    [
      'a chosen 1 on a cluster',
      1,
      { cluster: 'c', connect_urls: THREE },
      { replicas: 1, chosen: true },
    ],
  ])('%s', (_, chosen, server, expected) => {
    expect(streamReplicas(chosen, server)).toEqual(expected);
  });

  it.each([0, 6, 1.5, -1, Number.NaN])('refuses %s with CONFIG', (n) => {
    expect(() => streamReplicas(n, {})).toThrow(/replicas must be a whole number from 1 to 5/);
  });

  it.each([
    ['the same count is left', 3, { replicas: 3, chosen: false }, undefined],
    ['an automatic count raises', 1, { replicas: 3, chosen: false }, 3],
    ['an automatic count never lowers', 3, { replicas: 1, chosen: false }, undefined],
    ['a chosen count lowers', 3, { replicas: 1, chosen: true }, 1],
    ['a chosen count raises', 1, { replicas: 3, chosen: true }, 3],
    ['an unset count reads as one', 0, { replicas: 1, chosen: false }, undefined],
  ])('%s', (_, current, wanted, expected) => {
    expect(replicasToApply(current, wanted)).toBe(expected);
  });
});

describe('replicas on a single server (the shared nats-server)', () => {
  it('a bad count is refused before connecting', async () => {
    await expect(
      createJetStreamTransport({ insecureNats: true, servers: 'nats://127.0.0.1:1', replicas: 0 }),
    ).rejects.toMatchObject({ code: OpstateErrorCode.CONFIG });
  });

  it('three replicas on one server: CONFIG saying what to set, and no stream is made', async () => {
    const prefix = uniquePrefix('r3single');
    const transport = await createJetStreamTransport({
      insecureNats: true,
      servers: 'nats://127.0.0.1:4222',
      prefix,
      timing: TEST_TIMING,
      replicas: 3,
    });
    try {
      const err = await transport.ensure([ROUTE]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpstateError);
      expect(err).toMatchObject({ code: OpstateErrorCode.CONFIG });
      expect((err as Error).message).toMatch(/cannot keep 3 replicas.*OPSTATE_NATS_REPLICAS/);
      const jsm = await jetstreamManager(transport.connection);
      await expect(jsm.streams.info(transportNames(prefix).stream)).rejects.toThrow(/not found/);
    } finally {
      await transport.close();
    }
  });
});

describe('replicas on a three-node cluster (private nats-servers)', () => {
  let cluster: NatsClusterProcess;
  beforeAll(async () => {
    cluster = await NatsClusterProcess.create();
    await cluster.start();
    // start() waits up to 90 s for a meta leader with current peers (slow on a busy machine).
  }, 150_000);
  afterAll(async () => {
    await cluster?.dispose();
  });

  const replicasOf = async (servers: string, stream: string) => {
    const nc = await connect({ servers: servers.split(',') });
    try {
      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.info(stream);
      return { config: info.config.num_replicas, peers: 1 + (info.cluster?.replicas?.length ?? 0) };
    } finally {
      await nc.close();
    }
  };

  it('the stream, its consumers and the heartbeat bucket keep three copies by default', async () => {
    const prefix = uniquePrefix('r3auto');
    const transport = await createJetStreamTransport({
      insecureNats: true,
      servers: cluster.url,
      prefix,
      timing: TEST_TIMING,
    });
    try {
      await transport.ensure([ROUTE]);
      const names = transportNames(prefix);
      expect(await replicasOf(cluster.url, names.stream)).toEqual({ config: 3, peers: 3 });
      expect(await replicasOf(cluster.url, `KV_${names.heartbeatBucket}`)).toEqual({
        config: 3,
        peers: 3,
      });
      const jsm = await jetstreamManager(transport.connection);
      const consumer = await jsm.consumers.info(names.stream, names.consumer(ROUTE));
      expect(1 + (consumer.cluster?.replicas?.length ?? 0)).toBe(3);
    } finally {
      await transport.destroy();
    }
  }, 60_000);

  it('a stream made with one copy is raised to three when ensured again; a chosen 1 lowers it', async () => {
    const prefix = uniquePrefix('r3raise');
    const names = transportNames(prefix);
    const one = await createJetStreamTransport({
      insecureNats: true,
      servers: cluster.url,
      prefix,
      timing: TEST_TIMING,
      replicas: 1,
    });
    await one.ensure([ROUTE]);
    await one.close();
    expect((await replicasOf(cluster.url, names.stream)).config).toBe(1);

    const auto = await createJetStreamTransport({
      insecureNats: true,
      servers: cluster.url,
      prefix,
      timing: TEST_TIMING,
    });
    await auto.ensure([ROUTE]);
    await auto.close();
    expect((await replicasOf(cluster.url, names.stream)).config).toBe(3);
    expect((await replicasOf(cluster.url, `KV_${names.heartbeatBucket}`)).config).toBe(3);

    const lower = await createJetStreamTransport({
      insecureNats: true,
      servers: cluster.url,
      prefix,
      timing: TEST_TIMING,
      replicas: 1,
    });
    try {
      await lower.ensure([ROUTE]);
      expect((await replicasOf(cluster.url, names.stream)).config).toBe(1);
    } finally {
      await lower.destroy();
    }
  }, 60_000);

  it('five replicas on three servers: CONFIG, and the stream is not made', async () => {
    const prefix = uniquePrefix('r5');
    const transport = await createJetStreamTransport({
      insecureNats: true,
      servers: cluster.url,
      prefix,
      timing: TEST_TIMING,
      replicas: 5,
    });
    try {
      const err = await transport.ensure([ROUTE]).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: OpstateErrorCode.CONFIG });
      expect((err as Error).message).toMatch(/cannot keep 5 replicas/);
      const jsm = await jetstreamManager(transport.connection);
      await expect(jsm.streams.info(transportNames(prefix).stream)).rejects.toThrow(/not found/);
    } finally {
      await transport.close();
    }
  }, 60_000);
});

describe('a cluster whose node cannot start (private nats-servers)', () => {
  it('fails its start at once with the node and its last log lines, not after the meta-leader wait', async () => {
    const cluster = await NatsClusterProcess.create();
    // Something else holds the second node's client port: that nats-server exits, after its
    // start has already found the port answering.
    const squatter = createServer();
    await new Promise<void>((r) => squatter.listen(cluster.nodes[1]?.port, '127.0.0.1', r));
    try {
      const err = await cluster.start().then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err).toBeInstanceOf(Error);
      expect(err?.message).not.toMatch(/Timed out/);
      // Found exited while the cluster formed, or (if it exited first) before it listened.
      expect(err?.message).toMatch(
        /node n2 \(client \d+, .*\) exited while the cluster formed|exited \(1\) before it listened/,
      );
      expect(err?.message).toMatch(/address already in use/);
    } finally {
      await new Promise((r) => squatter.close(r));
      await cluster.dispose();
    }
  }, 60_000);
});
