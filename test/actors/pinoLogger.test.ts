import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createPinoLogger } from '../../actors/pinoLogger.ts';

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, destination };
}

describe('createPinoLogger', () => {
  it('writes one JSON line per entry, at or above its level, with the fields', () => {
    const { lines, destination } = capture();
    const logger = createPinoLogger({ level: 'info', destination, base: { role: 'worker' } });
    logger.log('DEBUG', 'not written', {});
    logger.log('WARNING', 'operation recovered', { operationId: 'op-1', path: 'reconciler' });
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0] as string) as Record<string, unknown>;
    expect(line).toMatchObject({
      level: 40,
      msg: 'operation recovered',
      operationId: 'op-1',
      path: 'reconciler',
      role: 'worker',
    });
    expect(typeof line.time).toBe('string');
  });

  it('keeps passwords, tokens and given secrets out of fields, messages and errors', () => {
    const { lines, destination } = capture();
    const logger = createPinoLogger({ level: 'debug', destination, secrets: ['sesame-42'] });
    logger.log('ERROR', 'cannot reach postgres://app:pg-pw-1@db:5432/app', {
      databaseUrl: 'postgres://app:pg-pw-2@db:5432/app',
      nats: { token: 'tok-3', servers: 'nats://u:nats-pw-4@n1:4222' },
      password: 'pw-5',
      error: new Error('auth failed for sesame-42'),
      note: 'the word sesame-42 again',
    });
    const text = lines.join('\n');
    for (const secret of ['pg-pw-1', 'pg-pw-2', 'tok-3', 'nats-pw-4', 'pw-5', 'sesame-42']) {
      expect(text).not.toContain(secret);
    }
    const line = JSON.parse(lines[0] as string) as Record<string, unknown>;
    expect(line.msg).toBe('cannot reach postgres://app:***@db:5432/app');
    expect(line.databaseUrl).toBe('postgres://app:***@db:5432/app');
    expect(line.nats).toEqual({ token: '[redacted]', servers: 'nats://u:***@n1:4222' });
    expect(line.error).toEqual({ type: 'Error', message: 'auth failed for ***' });
  });
});
