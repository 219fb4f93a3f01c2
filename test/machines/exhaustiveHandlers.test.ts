import { describe, expect, it } from 'vitest';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';

/**
 * A handler table keyed by kind is a `Record<OperationKind, …>`: leaving a kind out does not
 * compile. `npm test` runs `tsc --noEmit` first, and the `@ts-expect-error` below fails that run
 * if the compiler ever stops catching a missing kind (the seeds' #69 class of bug).
 */
type Handler = () => string;

const complete: Record<OperationKind, Handler> = {
  [OperationKind.RAW_DATA_PACKAGE]: () => 'package',
  [OperationKind.DATA_TRANSFER_PACKAGE]: () => 'bundle',
  [OperationKind.TRANSFER]: () => 'transfer',
  [OperationKind.UNPACK]: () => 'unpack',
  [OperationKind.LONG_TERM_ARCHIVE]: () => 'archive',
  [OperationKind.STAGING]: () => 'stage',
};

// @ts-expect-error — long_term_archive is missing, so this table must not compile.
const missingArchive: Record<OperationKind, Handler> = {
  [OperationKind.RAW_DATA_PACKAGE]: () => 'package',
  [OperationKind.DATA_TRANSFER_PACKAGE]: () => 'bundle',
  [OperationKind.TRANSFER]: () => 'transfer',
  [OperationKind.UNPACK]: () => 'unpack',
  [OperationKind.STAGING]: () => 'stage',
};

// @ts-expect-error — a free-text key such as the old 'archive' literal is not a kind.
const literalKey: Record<OperationKind, Handler> = { ...complete, archive: () => 'archive' };

describe('handler tables keyed by OperationKind', () => {
  it('has a handler for every kind at run time too', () => {
    for (const kind of OPERATION_KINDS) expect(typeof complete[kind]).toBe('function');
    expect(Object.keys(missingArchive)).not.toContain(OperationKind.LONG_TERM_ARCHIVE);
    expect(Object.keys(literalKey)).toContain('archive');
  });
});
