import { describe, expect, it } from 'vitest';
import {
  type BundleMembers,
  type CompletedOperation,
  planPipelinePass,
  stageKey,
} from '../../control-plane/planPipelinePass.ts';
import { OperationKind as K } from '../../machines/OperationKind.ts';
import { defaultPipeline } from '../../machines/pipeline.ts';

const pipeline = defaultPipeline({
  source: { site: 'obs', name: 'source' },
  destinations: [
    { buffer: { site: 'a', name: 'buffer' }, archive: { site: 'a', name: 'lta' } },
    { buffer: { site: 'b', name: 'buffer' }, archive: { site: 'b', name: 'lta' } },
  ],
});
const L = { source: 'l-src', b1: 'l-b1', a1: 'l-a1', b2: 'l-b2', a2: 'l-a2' };
const locations = new Map([
  ['source', L.source],
  ['buffer-1', L.b1],
  ['archive-1', L.a1],
  ['buffer-2', L.b2],
  ['archive-2', L.a2],
]);
const copy = (artifactType: string, artifactId: string, locationId: string, present = true) => ({
  copyId: `c-${artifactId}@${locationId}`,
  artifactType,
  artifactId,
  locationId,
  present,
});
const packaged = (pkg: string): CompletedOperation => ({
  id: `op-pack-${pkg}`,
  kind: K.RAW_DATA_PACKAGE,
  targetLocationId: L.source,
  fields: { rawDataPackageId: pkg, locationId: L.source },
  outputs: [copy('raw_data_package', pkg, L.source)],
});
const bundled: CompletedOperation = {
  id: 'op-bundle',
  kind: K.DATA_TRANSFER_PACKAGE,
  targetLocationId: L.source,
  fields: { dataTransferPackageId: 'dtp', locationId: L.source },
  outputs: [copy('data_transfer_package', 'dtp', L.source)],
};
const transferred: CompletedOperation = {
  id: 'op-transfer',
  kind: K.TRANSFER,
  targetLocationId: L.b1,
  fields: { dataTransferPackageId: 'dtp', sourceLocationId: L.source, destinationLocationId: L.b1 },
  outputs: [copy('data_transfer_package', 'dtp', L.b1)],
};
const unpacked = (present = true): CompletedOperation => ({
  id: 'op-unpack',
  kind: K.UNPACK,
  targetLocationId: L.b1,
  fields: { dataTransferPackageId: 'dtp', locationId: L.b1 },
  outputs: [copy('raw_data_package', 'p1', L.b1), copy('raw_data_package', 'p2', L.b1, present)],
});
const archived: CompletedOperation = {
  id: 'op-archive',
  kind: K.LONG_TERM_ARCHIVE,
  targetLocationId: L.a1,
  fields: { rawDataPackageId: 'p1', sourceLocationId: L.b1, destinationLocationId: L.a1 },
  outputs: [copy('raw_data_package', 'p1', L.a1)],
};
const members = (copies: (string | null)[]): Map<string, BundleMembers> =>
  new Map(['p1', 'p2'].map((p) => [p, { dataTransferPackageId: 'dtp', copies }]));
const allPackaged = members(['c-p1@l-src', 'c-p2@l-src']);

type Case = [
  string,
  {
    completed: CompletedOperation[];
    bundles?: Map<string, BundleMembers>;
    existing?: string[];
  },
  [string, string, Record<string, string>, string[]][],
];

const cases: Case[] = [
  [
    'the last member packaged: its bundle, from every member copy',
    { completed: [packaged('p2')], bundles: allPackaged },
    [
      [
        'bundling',
        'dtp',
        { dataTransferPackageId: 'dtp', locationId: L.source },
        ['c-p1@l-src', 'c-p2@l-src'],
      ],
    ],
  ],
  [
    'a member packaged while another is not: nothing yet',
    { completed: [packaged('p1')], bundles: members(['c-p1@l-src', null]) },
    [],
  ],
  [
    'two members packaged in one pass: one bundle',
    { completed: [packaged('p1'), packaged('p2')], bundles: allPackaged },
    [
      [
        'bundling',
        'dtp',
        { dataTransferPackageId: 'dtp', locationId: L.source },
        ['c-p1@l-src', 'c-p2@l-src'],
      ],
    ],
  ],
  [
    'a bundle: a transfer to each destination',
    { completed: [bundled] },
    [
      [
        'transfer-1',
        'dtp',
        { dataTransferPackageId: 'dtp', sourceLocationId: L.source, destinationLocationId: L.b1 },
        ['c-dtp@l-src'],
      ],
      [
        'transfer-2',
        'dtp',
        { dataTransferPackageId: 'dtp', sourceLocationId: L.source, destinationLocationId: L.b2 },
        ['c-dtp@l-src'],
      ],
    ],
  ],
  [
    'a bundle whose transfer to one destination exists (any status): only the other',
    { completed: [bundled], existing: [stageKey(K.TRANSFER, 'dtp', L.b1)] },
    [
      [
        'transfer-2',
        'dtp',
        { dataTransferPackageId: 'dtp', sourceLocationId: L.source, destinationLocationId: L.b2 },
        ['c-dtp@l-src'],
      ],
    ],
  ],
  [
    'a transfer: the unpack where it arrived',
    { completed: [transferred] },
    [['unpack-1', 'dtp', { dataTransferPackageId: 'dtp', locationId: L.b1 }, ['c-dtp@l-b1']]],
  ],
  [
    'an unpack: an archive per package (fan-out), none of a copy no longer present',
    { completed: [unpacked(false)] },
    [
      [
        'archive-1',
        'p1',
        { rawDataPackageId: 'p1', sourceLocationId: L.b1, destinationLocationId: L.a1 },
        ['c-p1@l-b1'],
      ],
    ],
  ],
  ['an archive: the end of the branch', { completed: [archived] }, []],
  [
    'a transfer to a location no stage runs at: no stage, nothing',
    { completed: [{ ...transferred, targetLocationId: 'l-elsewhere' }] },
    [],
  ],
  [
    'every next operation already exists (a pass repeated after a crash): nothing',
    {
      completed: [unpacked()],
      existing: [
        stageKey(K.LONG_TERM_ARCHIVE, 'p1', L.a1),
        stageKey(K.LONG_TERM_ARCHIVE, 'p2', L.a1),
      ],
    },
    [],
  ],
];

describe('planPipelinePass', () => {
  it.each(cases)('%s', (_, facts, expected) => {
    const creations = planPipelinePass({
      pipeline,
      locations,
      completed: facts.completed,
      bundles: facts.bundles ?? new Map(),
      existing: new Set(facts.existing ?? []),
      by: 'pipeline:preservation',
    });
    expect(creations.map((c) => [c.stage, c.subjectId, c.input.fields, c.input.inputs])).toEqual(
      expected,
    );
    for (const c of creations) expect(c.input.by).toBe('pipeline:preservation');
  });
});
