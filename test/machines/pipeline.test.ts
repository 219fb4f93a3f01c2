import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import {
  defaultPipeline,
  definePipeline,
  type PipelineSpec,
  type PipelineStage,
} from '../../machines/pipeline.ts';

const K = OperationKind;
const locations = {
  source: { site: 'obs', name: 'source' },
  buffer: { site: 'cologne', name: 'buffer' },
  archive: { site: 'cologne', name: 'lta' },
};
const valid: Record<string, PipelineStage> = {
  packaging: { kind: K.RAW_DATA_PACKAGE, at: 'source' },
  bundling: { kind: K.DATA_TRANSFER_PACKAGE, after: 'packaging', at: 'source' },
  transfer: { kind: K.TRANSFER, after: 'bundling', from: 'source', at: 'buffer' },
  unpack: { kind: K.UNPACK, after: 'transfer', at: 'buffer' },
  archive: { kind: K.LONG_TERM_ARCHIVE, after: 'unpack', from: 'buffer', at: 'archive' },
};
const spec = (stages: Record<string, PipelineStage>): PipelineSpec => ({
  name: 'p',
  locations,
  stages,
});

describe('definePipeline', () => {
  it('orders the stages of a valid pipeline, each after the one it follows', () => {
    const reversed = Object.fromEntries(Object.entries(valid).reverse());
    expect(definePipeline(spec(reversed)).order).toEqual([
      'packaging',
      'bundling',
      'transfer',
      'unpack',
      'archive',
    ]);
  });

  const refusals: [string, Record<string, PipelineStage>, RegExp][] = [
    [
      'a cycle',
      { ...valid, transfer: { ...(valid.transfer as PipelineStage), after: 'archive' } },
      /stages 'transfer' → 'archive' → 'unpack' → 'transfer' form a cycle/,
    ],
    [
      'a stage following itself',
      { ...valid, unpack: { ...(valid.unpack as PipelineStage), after: 'unpack' } },
      /stages 'unpack' → 'unpack' form a cycle/,
    ],
    [
      'an unknown kind',
      { ...valid, unpack: { kind: 'unzip' as OperationKind, after: 'transfer', at: 'buffer' } },
      /stage 'unpack' has unknown kind 'unzip'/,
    ],
    [
      'an unknown location',
      { ...valid, unpack: { kind: K.UNPACK, after: 'transfer', at: 'bufer' } },
      /stage 'unpack' names unknown location 'bufer' \(at\)/,
    ],
    [
      'an unknown from location',
      { ...valid, transfer: { kind: K.TRANSFER, after: 'bundling', from: 'src', at: 'buffer' } },
      /stage 'transfer' names unknown location 'src' \(from\)/,
    ],
    [
      'an unknown stage followed',
      { ...valid, unpack: { kind: K.UNPACK, after: 'tranfser', at: 'buffer' } },
      /stage 'unpack' follows unknown stage 'tranfser'/,
    ],
    [
      'a stage consuming what its predecessor does not produce',
      {
        ...valid,
        archive: { kind: K.LONG_TERM_ARCHIVE, after: 'transfer', from: 'buffer', at: 'archive' },
      },
      /stage 'archive' \(long_term_archive\) can never be reached: it consumes raw_data_package copies, but 'transfer' \(transfer\) produces data_transfer_package copies/,
    ],
    [
      'a stage reading where its predecessor does not write',
      { ...valid, unpack: { kind: K.UNPACK, after: 'transfer', at: 'source' } },
      /stage 'unpack' can never be reached: it reads at 'source', but 'transfer' writes at 'buffer'/,
    ],
    [
      'packaging after another stage (it consumes raw data files, which no stage produces)',
      { ...valid, repack: { kind: K.RAW_DATA_PACKAGE, after: 'unpack', at: 'buffer' } },
      /stage 'repack' \(raw_data_package\) can never be reached/,
    ],
    [
      'two stages of one kind at one location',
      {
        ...valid,
        again: { kind: K.LONG_TERM_ARCHIVE, after: 'unpack', from: 'buffer', at: 'archive' },
      },
      /stages 'archive' and 'again' both create long_term_archive at cologne\/lta/,
    ],
    [
      'a move without from',
      { ...valid, transfer: { kind: K.TRANSFER, after: 'bundling', at: 'buffer' } },
      /stage 'transfer' \(transfer\) needs 'from'/,
    ],
    [
      'a from on a kind that reads where it runs',
      { ...valid, unpack: { kind: K.UNPACK, after: 'transfer', from: 'buffer', at: 'buffer' } },
      /stage 'unpack' \(unpack\) reads where it runs; drop 'from'/,
    ],
    ['no stage', {}, /has no stage/],
  ];
  it.each(refusals)('refuses %s with BAD_INPUT naming it', (_, stages, message) => {
    expect(() => definePipeline(spec(stages))).toThrow(
      expect.objectContaining({
        code: OpstateErrorCode.BAD_INPUT,
        message: expect.stringMatching(message),
      }),
    );
  });

  it('refuses a name that cannot name its cursor', () => {
    expect(() => definePipeline({ ...spec(valid), name: 'a b' })).toThrow(/name must be/);
  });
});

describe('defaultPipeline', () => {
  it('mirrors the source documents: package, bundle, then per destination transfer, unpack, archive', () => {
    const p = defaultPipeline({
      source: locations.source,
      destinations: [
        { buffer: locations.buffer, archive: locations.archive },
        { buffer: { site: 'b', name: 'buffer' }, archive: { site: 'b', name: 'lta' } },
      ],
    });
    expect(p.order).toEqual([
      'packaging',
      'bundling',
      'transfer-1',
      'unpack-1',
      'archive-1',
      'transfer-2',
      'unpack-2',
      'archive-2',
    ]);
    expect(p.stages['archive-2']).toEqual({
      kind: K.LONG_TERM_ARCHIVE,
      after: 'unpack-2',
      from: 'buffer-2',
      at: 'archive-2',
    });
    expect(p.locations['archive-2']).toEqual({ site: 'b', name: 'lta' });
  });

  it('refuses two destinations sharing one archive (the second archive could never be created)', () => {
    const d = { buffer: locations.buffer, archive: locations.archive };
    expect(() =>
      defaultPipeline({
        source: locations.source,
        destinations: [d, { buffer: { site: 'b', name: 'buffer' }, archive: locations.archive }],
      }),
    ).toThrow(/stages 'archive-1' and 'archive-2' both create long_term_archive at cologne\/lta/);
  });
});
