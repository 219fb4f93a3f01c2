import { describe, expect, it } from 'vitest';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { type OutputCopy, toOutputInserts } from '../../persistence/OutputCopy.ts';

const A = '0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f';
const B = '0b6f4d2e-1c1a-4f7e-9a53-0d5c2f0e9a11';
const copy = { artifactType: 'raw_data_package', artifactId: A, locationId: B } as const;

// What a handler reads when its outputs are malformed, word for word.
describe('toOutputInserts', () => {
  const messageOf = (output: unknown) => {
    try {
      toOutputInserts('op-1', [output as OutputCopy]);
    } catch (err) {
      expect(err).toMatchObject({ code: OpstateErrorCode.BAD_INPUT });
      return (err as Error).message;
    }
    throw new Error('accepted');
  };

  it('accepts a copy with or without its optional facts', () => {
    expect(
      toOutputInserts('op-1', [copy, { ...copy, locationId: A, size: 0, path: null }]),
    ).toEqual([
      {
        operation_id: 'op-1',
        artifact_type: 'raw_data_package',
        artifact_id: A,
        location_id: B,
        path: null,
        checksum: null,
        size: null,
      },
      {
        operation_id: 'op-1',
        artifact_type: 'raw_data_package',
        artifact_id: A,
        location_id: A,
        path: null,
        checksum: null,
        size: 0,
      },
    ]);
  });

  it.each([
    [
      'an artifact named by its name',
      { ...copy, artifactId: 'obs-1' },
      "output 0 of operation op-1: artifactId must be a uuid such as 0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f; got 'obs-1'",
    ],
    [
      'no location',
      { artifactType: 'raw_data_package', artifactId: A },
      'output 0 of operation op-1: locationId is required',
    ],
    [
      'an unknown artifact type and a negative size',
      { ...copy, artifactType: 'tarball', size: -1 },
      "output 0 of operation op-1: artifactType must be one of raw_data_file, raw_data_package, data_transfer_package; got 'tarball'; size must be a whole number of bytes ≥ 0 or null; got -1",
    ],
    [
      'a misspelt fact',
      { ...copy, checksun: 'sha256:00' },
      "output 0 of operation op-1: unknown field 'checksun'; known: artifactType, artifactId, locationId, path, checksum, size",
    ],
    [
      'no object',
      'obs-1',
      "output 0 of operation op-1: must be an object { artifactType, artifactId, locationId, path?, checksum?, size? }; got 'obs-1'",
    ],
  ])('names %s in words', (_, output, message) => {
    expect(messageOf(output)).toBe(message);
  });
});
