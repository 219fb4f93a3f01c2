import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { queueSubject } from '../../machines/routing.ts';
import { createJetStreamTransport } from '../../transport/jetstream/createJetStreamTransport.ts';
import { reachable, uniquePrefix } from './helpers.ts';
import { transportContract } from './transportContract.ts';

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
