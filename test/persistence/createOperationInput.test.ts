import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import {
  type CreateOperationInput,
  toOperationInsert,
} from '../../persistence/CreateOperationInput.ts';

const A = '0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f';
const B = '0b6f4d2e-1c1a-4f7e-9a53-0d5c2f0e9a11';
const C = 'a3bb189e-8bf9-3888-9912-ace4e6543002';
const archive = { rawDataPackageId: A, sourceLocationId: B, destinationLocationId: C };
const now = new Date('2026-01-01T00:00:00.000Z');

const valid = (input: unknown) =>
  toOperationInsert(
    { kind: OperationKind.LONG_TERM_ARCHIVE, ...(input as object) } as CreateOperationInput,
    now,
  );

// Rows are checked without the schemas when they are plainly well-formed: every input below must
// get the schemas' verdict all the same (the invalid ones a BAD_INPUT naming the field).
describe('toOperationInsert', () => {
  it.each([
    ['the required fields', { fields: archive }],
    ['an optional text field', { fields: { ...archive, archiveKey: 'k/1' } }],
    ['an optional field null', { fields: { ...archive, archiveKey: null } }],
    ['an optional field undefined', { fields: { ...archive, archiveKey: undefined } }],
    ['every option', { fields: archive, id: A, groupId: B, maxRetries: 0, createdBy: 'me' }],
    ['the largest retry budget', { fields: archive, maxRetries: 1000 }],
    ['inputs', { fields: archive, inputs: [A, B, A] }],
    ['options left undefined', { fields: archive, id: undefined, inputs: undefined }],
  ])('accepts %s', (_, input) => {
    const given = input as Partial<CreateOperationInput>;
    const row = valid(input);
    expect(row.fields).toEqual(given.fields);
    expect(row.target_location_id).toBe(C);
    expect(row.inputs).toEqual([...new Set(given.inputs ?? [])]);
    expect(row.max_retries).toBe(given.maxRetries ?? 3);
  });

  it.each([
    ['an unknown option', { fields: archive, priority: 1 }, /priority/],
    ['an unknown field', { fields: { ...archive, extra: 'x' } }, /extra/],
    ['a required field missing', { fields: { ...archive, rawDataPackageId: undefined } }, /raw/],
    ['a required field null', { fields: { ...archive, sourceLocationId: null } }, /source/],
    ['a field that is no uuid', { fields: { ...archive, rawDataPackageId: 'x' } }, /uuid/],
    ['an empty text field', { fields: { ...archive, archiveKey: '' } }, /archiveKey/],
    ['a text field that is no text', { fields: { ...archive, archiveKey: 7 } }, /archiveKey/],
    ['fields as an array', { fields: [archive] }, /fields/],
    ['no fields', {}, /fields/],
    ['an id that is no uuid', { fields: archive, id: 'op-1' }, /id/],
    ['a group id that is no uuid', { fields: archive, groupId: 7 }, /groupId/],
    ['a fractional retry budget', { fields: archive, maxRetries: 1.5 }, /maxRetries/],
    ['a negative retry budget', { fields: archive, maxRetries: -1 }, /maxRetries/],
    ['too large a retry budget', { fields: archive, maxRetries: 1001 }, /maxRetries/],
    ['an empty creator', { fields: archive, createdBy: '' }, /createdBy/],
    ['an input that is no uuid', { fields: archive, inputs: [A, 'x'] }, /inputs/],
    ['inputs that are no list', { fields: archive, inputs: A }, /inputs/],
    [
      'a route not frozen',
      { fields: archive, route: { operationType: 'x', locationType: 'y' } },
      /route/,
    ],
  ])('refuses %s with BAD_INPUT naming it', (_, input, named) => {
    expect(() => valid(input)).toThrow(
      expect.objectContaining({ code: OpstateErrorCode.BAD_INPUT }),
    );
    expect(() => valid(input)).toThrow(named);
  });
});
