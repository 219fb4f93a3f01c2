import { describe, expect, it } from 'vitest';
import { classifyFailure } from '../../machines/classifyFailure.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { toOpstateError } from '../../persistence/databaseError.ts';

/** A driver error as postgres.js raises it for a server's ErrorResponse. */
const serverError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe('the SQLSTATEs of a failover', () => {
  it.each([
    ['25006', 'cannot execute INSERT in a read-only transaction'],
    ['57P01', 'terminating connection due to administrator command'],
    ['57P02', 'terminating connection because of crash of another server process'],
    ['57P03', 'the database system is starting up'],
    ['53300', 'sorry, too many clients already'],
  ])('%s (%s) is an outage to wait out', (code, message) => {
    const err = toOpstateError(serverError(code, message));
    expect(err).toMatchObject({ code: OpstateErrorCode.DATABASE, retryable: true });
    expect(classifyFailure(err)).toBe('outage');
  });

  it('a write refused as read-only names the URL that reaches the primary', () => {
    const err = toOpstateError(
      serverError('25006', 'cannot execute UPDATE in a read-only transaction'),
    );
    expect(err.message).toContain('target_session_attrs=read-write');
  });

  it('a constraint the statement broke stays the caller’s to fix', () => {
    expect(classifyFailure(toOpstateError(serverError('23514', 'check')))).toBe('refused');
  });
});
