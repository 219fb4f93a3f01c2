import { describe, expect, it } from 'vitest';
import { missingDriverGuard } from '../../persistence/driverPatch.ts';

describe('the postgres.js nextWrite guard', () => {
  it('is applied at install (patch-package), so a Postgres restart cannot crash a process inside the driver', () => {
    expect(missingDriverGuard()).toBeUndefined();
  });
});
