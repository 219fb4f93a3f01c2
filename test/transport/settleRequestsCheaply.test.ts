import { RequestOne } from '@nats-io/nats-core/internal';
import { connect, errors, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { settleRequestsCheaply } from '../../transport/jetstream/settleRequestsCheaply.ts';
import { uniquePrefix } from './helpers.ts';

/**
 * The NATS client settles a request without building the "cancelled" error it would throw away,
 * on the real server, and requests still resolve, time out and reject as before.
 */
let nc: NatsConnection;
const subject = `${uniquePrefix('settle')}.echo`;

beforeAll(async () => {
  nc = await connect({ servers: 'nats://127.0.0.1:4222', noAsyncTraces: true });
  nc.subscribe(subject, { callback: (_err, msg) => void msg.respond(msg.data) });
  await nc.flush();
});
afterAll(async () => {
  await nc?.close();
  vi.restoreAllMocks();
});

describe('settleRequestsCheaply', () => {
  it('applies to the installed client, whose resolver settles before it cancels', () => {
    expect(settleRequestsCheaply()).toBe(true);
    expect(settleRequestsCheaply()).toBe(true); // once: a second call changes nothing
  });

  it('a request answered resolves with the reply and never reaches the cancel that builds an error', async () => {
    settleRequestsCheaply();
    const cancel = vi.spyOn(RequestOne.prototype, 'cancel');
    const replies = await Promise.all(
      ['a', 'b', 'c'].map((text) => nc.request(subject, text, { timeout: 5000 })),
    );
    expect(replies.map((m) => m.string())).toEqual(['a', 'b', 'c']);
    expect(cancel).not.toHaveBeenCalled();
    cancel.mockRestore();
  });

  it('a request nobody answers still rejects as before (no responders), and a slow one times out', async () => {
    settleRequestsCheaply();
    await expect(nc.request(`${subject}.nobody`, 'x', { timeout: 5000 })).rejects.toThrow(
      /no responders/i,
    );
    const slow = `${subject}.slow`;
    const held = nc.subscribe(slow, { callback: () => {} });
    await nc.flush();
    await expect(nc.request(slow, 'x', { timeout: 50 })).rejects.toBeInstanceOf(
      errors.TimeoutError,
    );
    held.unsubscribe();
  });
});
