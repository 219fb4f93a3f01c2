import { describe, expect, it } from 'vitest';
import { ArtifactType } from '../../machines/ArtifactType.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultPipeline } from '../../machines/pipeline.ts';
import {
  planRollback,
  type RollbackCopy,
  type RollbackFacts,
  type RollbackOperation,
} from '../../machines/planRollback.ts';

/**
 * The rollback's decision on facts written out by hand: a data transfer package of two packages,
 * bundled, transferred, unpacked and archived at one site. Rolled back to its transfer, the unpack
 * produces both packages' buffer copies again: refused while one of them is being deleted or
 * failed its deletion (the re-run would take that copy as its output), planned once it is gone.
 */
const pipeline = defaultPipeline({
  source: { site: 's', name: 'source' },
  destinations: [{ buffer: { site: 's', name: 'buffer' }, archive: { site: 's', name: 'lta' } }],
});
const locations = new Map([
  ['source', 'L-src'],
  ['buffer-1', 'L-buf'],
  ['archive-1', 'L-lta'],
]);
const where: Record<string, string> = {
  'L-src': 's/source',
  'L-buf': 's/buffer',
  'L-lta': 's/lta',
};

const copy = (artifactId: string, locationId: string, status = 'PRESENT'): RollbackCopy => ({
  id: `c-${artifactId}@${locationId}`,
  artifactType: artifactId === 'dtp' ? 'data_transfer_package' : 'raw_data_package',
  artifactId,
  locationId,
  location: where[locationId] as string,
  status,
});

let n = 0;
const op = (
  kind: OperationKind,
  subjectId: string,
  targetLocationId: string,
  io: { from?: string; inputs: RollbackCopy[]; outputs: RollbackCopy[] },
): RollbackOperation => ({
  id: `op-${++n}`,
  kind,
  status: 'COMPLETED',
  subjectId,
  targetLocationId,
  fields: io.from === undefined ? {} : { sourceLocationId: io.from },
  inputs: io.inputs,
  outputs: io.outputs,
  supersededBy: null,
  createdAt: `2026-12-01T00:00:0${n}Z`,
});

/** The family's facts, with the first package's buffer copy in `bufferStatus`. */
function facts(bufferStatus: string): RollbackFacts {
  const atSource = ['p1', 'p2'].map((p) => copy(p, 'L-src'));
  const atBuffer = [copy('p1', 'L-buf', bufferStatus), copy('p2', 'L-buf')];
  const operations = [
    op(OperationKind.DATA_TRANSFER_PACKAGE, 'dtp', 'L-src', {
      inputs: atSource,
      outputs: [copy('dtp', 'L-src')],
    }),
    op(OperationKind.TRANSFER, 'dtp', 'L-buf', {
      from: 'L-src',
      inputs: [copy('dtp', 'L-src')],
      outputs: [copy('dtp', 'L-buf')],
    }),
    op(OperationKind.UNPACK, 'dtp', 'L-buf', { inputs: [copy('dtp', 'L-buf')], outputs: atBuffer }),
    ...atBuffer.map((c) =>
      op(OperationKind.LONG_TERM_ARCHIVE, c.artifactId, 'L-lta', {
        from: 'L-buf',
        inputs: [c],
        outputs: [copy(c.artifactId, 'L-lta')],
      }),
    ),
  ];
  return {
    artifact: { type: ArtifactType.DATA_TRANSFER_PACKAGE, id: 'dtp', members: ['p1', 'p2'] },
    operations,
    liveCopies: new Map([['dtp', [copy('dtp', 'L-src')]]]),
  };
}

const plan = (bufferStatus: string) =>
  planRollback({ pipeline, locations, stage: 'transfer-1', facts: facts(bufferStatus) });

describe('a rollback whose re-run would produce a copy whose deletion began or failed', () => {
  it.each([
    ['DELETION_FAILED', /which is DELETION_FAILED; its deletion failed: resolve it first/],
    [
      'DELETION_SCHEDULED',
      /which is DELETION_SCHEDULED; it is being deleted: wait for the deletion to end/,
    ],
    ['DELETION_IN_PROGRESS', /which is DELETION_IN_PROGRESS; it is being deleted/],
  ])('is refused while the copy is %s, naming the copy and the stage', (status, why) => {
    const err = (() => {
      try {
        plan(status);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(OpstateError);
    expect((err as OpstateError).code).toBe(OpstateErrorCode.CONFLICT);
    expect((err as OpstateError).message).toMatch(why);
    expect((err as OpstateError).message).toContain(
      "would have 'unpack-1' produce copy c-p1@L-buf (raw_data_package p1 at s/buffer) again",
    );
    expect((err as OpstateError).details).toMatchObject({ copyId: 'c-p1@L-buf', status });
  });

  it.each(['PRESENT', 'DELETED'])('is planned when the copy is %s', (status) => {
    const p = plan(status);
    expect(p.stages).toEqual(['transfer-1', 'unpack-1', 'archive-1']);
    expect(p.redone.map((r) => r.stage)).toEqual([
      'transfer-1',
      'unpack-1',
      'archive-1',
      'archive-1',
    ]);
    expect(p.superseded.map((c) => c.id)).toContain('c-p1@L-buf');
  });
});

describe('a raw data package rolled back to a stage of its bundle', () => {
  const ofPackage = (): RollbackFacts => ({
    ...facts('PRESENT'),
    artifact: {
      type: ArtifactType.RAW_DATA_PACKAGE,
      id: 'p1',
      bundleId: 'dtp',
      bundleMembers: ['p1', 'p2'],
    },
  });

  it('redoes its bundle-mates’ later stages too: the unpack writes every member’s buffer copy again', () => {
    const p = planRollback({ pipeline, locations, stage: 'unpack-1', facts: ofPackage() });
    expect(p.redone.map((r) => `${r.stage}:${r.subjectId}`)).toEqual([
      'unpack-1:dtp',
      'archive-1:p1',
      'archive-1:p2',
    ]);
    expect(p.widened).toEqual(['p2']);
    expect(p.creates.map((c) => `${c.stage}:${c.subjectId}`)).toEqual(['unpack-1:dtp']);
  });

  it('redoes only its own stages when none of the bundle is redone', () => {
    const p = planRollback({ pipeline, locations, stage: 'archive-1', facts: ofPackage() });
    expect(p.redone.map((r) => `${r.stage}:${r.subjectId}`)).toEqual(['archive-1:p1']);
    expect(p.widened).toEqual([]);
  });
});
