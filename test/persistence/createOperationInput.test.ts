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
    [
      'every option',
      { fields: archive, id: A, groupId: B, maxRetries: 0, deadlineMs: 7_200_000, by: 'me' },
    ],
    ['the shortest deadline', { fields: archive, deadlineMs: 1 }],
    ['the longest deadline', { fields: archive, deadlineMs: 604_800_000 }],
    ['a scoped package name as submitter', { fields: archive, by: '@acme/ingest' }],
    ['the operator as submitter', { fields: archive, by: 'operator' }],
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
    expect(row.deadline_ms).toBe(given.deadlineMs ?? null);
  });

  it.each([
    ['an unknown option', { fields: archive, urgency: 1 }, /urgency/],
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
    ['an empty submitter', { fields: archive, by: '' }, /^by must be/],
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

const ARCHIVE_FIELDS = 'rawDataPackageId, sourceLocationId, destinationLocationId, archiveKey';
const UUID = '0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f';

// The messages a caller reads, word for word: in the caller's terms (the field, the kind, what is
// allowed), never a validator's wording.
describe('toOperationInsert messages', () => {
  const messageOf = (input: unknown) => {
    try {
      toOperationInsert(input as CreateOperationInput, now);
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error('accepted');
  };
  const transfer = { dataTransferPackageId: A, sourceLocationId: B, destinationLocationId: C };

  it.each([
    [
      'a missing required field',
      { kind: 'transfer', fields: { dataTransferPackageId: A, sourceLocationId: B } },
      "field 'destinationLocationId' is required for TRANSFER",
    ],
    [
      'a required field given as null',
      { kind: 'long_term_archive', fields: { ...archive, sourceLocationId: null } },
      "field 'sourceLocationId' is required for LONG_TERM_ARCHIVE",
    ],
    [
      'a misspelt field',
      {
        kind: 'transfer',
        fields: { dataTransferPackageId: A, sourceLocationId: B, destinatonLocationId: C },
      },
      "unknown field 'destinatonLocationId' for TRANSFER; known: dataTransferPackageId, sourceLocationId, destinationLocationId; field 'destinationLocationId' is required for TRANSFER",
    ],
    [
      'a field that is no uuid',
      { kind: 'transfer', fields: { ...transfer, sourceLocationId: 'lta' } },
      `field 'sourceLocationId' of TRANSFER must be a uuid such as ${UUID}; got 'lta'`,
    ],
    [
      'a text field that is no text',
      { kind: 'long_term_archive', fields: { ...archive, archiveKey: 7 } },
      "field 'archiveKey' of LONG_TERM_ARCHIVE must be a non-empty string; got 7",
    ],
    [
      'fields that are no object',
      { kind: 'long_term_archive', fields: ['x'] },
      `fields of LONG_TERM_ARCHIVE must be an object of field names to values (${ARCHIVE_FIELDS}); got an array ["x"]`,
    ],
    [
      'no fields',
      { kind: 'long_term_archive' },
      `fields of LONG_TERM_ARCHIVE must be an object of field names to values (${ARCHIVE_FIELDS}); got nothing`,
    ],
    [
      'an unknown option',
      { kind: 'transfer', fields: transfer, urgency: 1 },
      "unknown option 'urgency'; known: kind, fields, inputs, id, groupId, maxRetries, deadlineMs, notBefore, priority, route, by",
    ],
    [
      'an id that is no uuid',
      { kind: 'transfer', fields: transfer, id: 'op-1' },
      `id must be a uuid such as ${UUID}; got 'op-1'`,
    ],
    [
      'an input that is no uuid',
      { kind: 'transfer', fields: transfer, inputs: [A, 'copy-2'] },
      `inputs[1] must be a uuid such as ${UUID}; got 'copy-2'`,
    ],
    [
      'too large a retry budget',
      { kind: 'transfer', fields: transfer, maxRetries: 1001 },
      'maxRetries must be a whole number from 0 to 1000; got 1001',
    ],
    [
      'a deadline of no time at all',
      { kind: 'transfer', fields: transfer, deadlineMs: 0 },
      "deadlineMs must be a whole number of milliseconds from 1 to 604800000 (7 days); got 0; leave it out for the kind's deadline",
    ],
    [
      'a deadline past the cap',
      { kind: 'transfer', fields: transfer, deadlineMs: 604_800_001 },
      "deadlineMs must be a whole number of milliseconds from 1 to 604800000 (7 days); got 604800001; leave it out for the kind's deadline",
    ],
    [
      'a deadline given as a duration text',
      { kind: 'transfer', fields: transfer, deadlineMs: '2h' },
      "deadlineMs must be a whole number of milliseconds from 1 to 604800000 (7 days); got '2h'; leave it out for the kind's deadline",
    ],
    [
      'a deadline with a fraction of a millisecond',
      { kind: 'transfer', fields: transfer, deadlineMs: 1.5 },
      "deadlineMs must be a whole number of milliseconds from 1 to 604800000 (7 days); got 1.5; leave it out for the kind's deadline",
    ],
    [
      'a submitter with a space',
      { kind: 'transfer', fields: transfer, by: 'my service' },
      "by must be 1 to 64 characters of letters, digits and . _ : @ / -, other than scheduler, heartbeat_monitor, deadline, reconciler, broker; got 'my service'",
    ],
    [
      'a submitter of 65 characters',
      { kind: 'transfer', fields: transfer, by: 'x'.repeat(65) },
      `by must be 1 to 64 characters of letters, digits and . _ : @ / -, other than scheduler, heartbeat_monitor, deadline, reconciler, broker; got '${'x'.repeat(65)}'`,
    ],
    [
      "a submitter that names one of opstate's own actors",
      { kind: 'transfer', fields: transfer, by: 'reconciler' },
      "by 'reconciler' is one of opstate's own actors; name the service or person that submits",
    ],
    [
      'an unknown kind',
      { kind: 'archive', fields: {} },
      "unknown operation kind 'archive'; use one of raw_data_package, data_transfer_package, transfer, unpack, long_term_archive, staging",
    ],
  ])('%s', (_, input, message) => {
    expect(messageOf(input)).toBe(message);
  });

  it('names a route that is not frozen with the routes there are', () => {
    const message = messageOf({
      kind: 'transfer',
      fields: transfer,
      route: { operationType: 'x', locationType: 'y' },
    });
    expect(message).toMatch(
      /^route an object \{"operationType":"x","locationType":"y"\} is not one of the frozen routes \(QUEUE_OPERATIONS_BY_LOCATION_TYPE\); leave it out for the kind's default, or give \{ operationType, locationType \} of one of \w+/,
    );
  });

  it('carries each problem and the known fields as data', () => {
    try {
      toOperationInsert(
        { kind: 'transfer', fields: { sourceLocationId: B } } as unknown as CreateOperationInput,
        now,
      );
      expect.unreachable();
    } catch (err) {
      expect(err).toMatchObject({
        code: OpstateErrorCode.BAD_INPUT,
        details: {
          kind: 'transfer',
          problems: [
            "field 'dataTransferPackageId' is required for TRANSFER",
            "field 'destinationLocationId' is required for TRANSFER",
          ],
          expected: ['dataTransferPackageId', 'sourceLocationId', 'destinationLocationId'],
        },
      });
    }
  });
});
