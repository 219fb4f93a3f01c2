import { afterEach, describe, expect, it, vi } from 'vitest';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { consoleLogger } from '../../observe/Logger.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('consoleLogger', () => {
  it('writes an err field as its type, message and code, not as {}', () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });
    const err = new OpstateError(OpstateErrorCode.DATABASE, 'Postgres is unreachable');
    consoleLogger.log('WARNING', 'relay cannot reach the database or broker', { err });
    expect(written).toHaveLength(1);
    const json = /WARNING relay cannot reach the database or broker (\{.*\})\n$/.exec(
      written[0] as string,
    )?.[1];
    expect(JSON.parse(json as string)).toEqual({
      err: { type: 'OpstateError', message: 'Postgres is unreachable', code: 'DATABASE' },
    });
  });
});
