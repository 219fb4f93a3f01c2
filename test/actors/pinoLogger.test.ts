import { hostname } from 'node:os';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { writeLines } from '../../observe/LogLine.ts';
import { createPinoLogger } from '../../observe/pinoLogger.ts';
import { afterRun } from '../../worker/decideRun.ts';

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
      pid: process.pid,
      hostname: hostname(),
    });
    expect(typeof line.time).toBe('string');
  });

  it('writes an error as err: type, message, stack, its code and fields, and its cause', () => {
    const { lines, destination } = capture();
    const logger = createPinoLogger({ level: 'info', destination });
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
      code: 'ECONNREFUSED',
    });
    const err = new OpstateError(OpstateErrorCode.DATABASE, 'Postgres is unreachable', {
      cause,
      retryable: true,
    });
    logger.log('ERROR', 'relay pass failed; retrying', { err, failures: 1 });
    const line = JSON.parse(lines[0] as string) as { err: Record<string, unknown> };
    expect(line.err).toMatchObject({
      type: 'OpstateError',
      message: 'Postgres is unreachable',
      code: 'DATABASE',
      retryable: true,
      cause: {
        type: 'Error',
        message: 'connect ECONNREFUSED 127.0.0.1:5432',
        code: 'ECONNREFUSED',
      },
    });
    expect(line.err.stack).toMatch(/^OpstateError: Postgres is unreachable\n\s+at /);
    expect((line.err.cause as Record<string, unknown>).stack).toMatch(
      /^Error: connect ECONNREFUSED/,
    );
    // The same through pino itself, as code that holds `logger.pino` writes it.
    logger.pino.warn({ err }, 'direct');
    const direct = JSON.parse(lines[1] as string) as { err: Record<string, unknown> };
    expect(direct.err).toMatchObject({ type: 'OpstateError', code: 'DATABASE' });
    expect(direct.err.stack).toContain('Postgres is unreachable');
  });

  it('writes a handler failure at warn, with the thrown error and its stack', () => {
    const { lines, destination } = capture();
    const logger = createPinoLogger({ level: 'info', destination });
    const next = afterRun({
      operation: { id: 'op-1', kind: 'transfer', attempt: 2 },
      outcome: { ok: false, error: new TypeError('upload is not a function') },
      abort: undefined,
      stopping: false,
      now: 0,
    });
    if (next.action !== 'fail') throw new Error(`expected fail, got ${next.action}`);
    writeLines(logger, [next.line]);
    const line = JSON.parse(lines[0] as string) as Record<string, unknown>;
    expect(line).toMatchObject({
      level: 40,
      msg: 'operation failed',
      operationId: 'op-1',
      kind: 'transfer',
      attempt: 2,
      retryable: true,
      err: { type: 'TypeError', message: 'upload is not a function' },
    });
    expect((line.err as { stack: string }).stack).toContain('pinoLogger.test.ts');
  });

  it('cuts a long error text and a long parameter list', () => {
    const { lines, destination } = capture();
    const logger = createPinoLogger({ level: 'info', destination });
    const err = Object.assign(new Error(`Failed query: ${'x'.repeat(20_000)}`), {
      params: Array.from({ length: 5000 }, (_, i) => i),
    });
    logger.log('ERROR', 'insert failed', { err });
    const line = JSON.parse(lines[0] as string) as { err: { message: string; params: unknown[] } };
    expect(line.err.message.length).toBeLessThan(8_100);
    expect(line.err.message).toMatch(/more characters\)$/);
    expect(line.err.params).toHaveLength(21);
    expect(lines[0]?.length).toBeLessThan(30_000);
  });

  it('keeps passwords, tokens and given secrets out of fields, messages and errors', () => {
    const { lines, destination } = capture();
    const logger = createPinoLogger({ level: 'debug', destination, secrets: ['sesame-42'] });
    logger.log('ERROR', 'cannot reach postgres://app:pg-pw-1@db:5432/app', {
      databaseUrl: 'postgres://app:pg-pw-2@db:5432/app',
      nats: { token: 'tok-3', servers: 'nats://u:nats-pw-4@n1:4222' },
      password: 'pw-5',
      err: new Error('auth failed for sesame-42'),
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
    expect(line.err).toMatchObject({ type: 'Error', message: 'auth failed for ***' });
    expect((line.err as { stack: string }).stack).toMatch(/^Error: auth failed for \*\*\*\n/);
  });
});
