import { describe, expect, expectTypeOf, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { CreateOperationInput } from '../../persistence/CreateOperationInput.ts';
import type { OperationStore } from '../../persistence/OperationStore.ts';
import type { OperationFields } from '../../persistence/subtypeFields.ts';
import type { Runtime } from '../../runtime/Runtime.ts';

// What the compiler says about `fields`: `npm run typecheck` (tsc --noEmit over test/) fails when
// a `@ts-expect-error` below no longer has an error to expect, so a misspelt or missing field that
// compiled again would fail the build. The runtime assertions only keep vitest's count honest.

const A = '0190c3d2-7a4e-4b8e-9f10-2a3b4c5d6e7f';
const B = '0b6f4d2e-1c1a-4f7e-9a53-0d5c2f0e9a11';
const C = 'a3bb189e-8bf9-3888-9912-ace4e6543002';

describe('fields typed per kind', () => {
  it('derives each kind’s fields from its subtype table, optional where the column is nullable', () => {
    expectTypeOf<OperationFields<OperationKind.TRANSFER>>().toEqualTypeOf<{
      readonly dataTransferPackageId: string;
      readonly sourceLocationId: string;
      readonly destinationLocationId: string;
    }>();
    expectTypeOf<OperationFields<OperationKind.LONG_TERM_ARCHIVE>>().toEqualTypeOf<{
      readonly rawDataPackageId: string;
      readonly sourceLocationId: string;
      readonly destinationLocationId: string;
      readonly archiveKey?: string | null | undefined;
    }>();
    expectTypeOf<OperationFields<OperationKind.RAW_DATA_PACKAGE>>().toEqualTypeOf<{
      readonly rawDataPackageId: string;
      readonly locationId: string;
    }>();
    expectTypeOf<Runtime['submit']>().parameter(0).toEqualTypeOf<CreateOperationInput>();
    expectTypeOf<OperationStore['create']>().parameter(0).toEqualTypeOf<CreateOperationInput>();
  });

  it('compiles a correct create request and refuses a misspelt, missing or foreign field', () => {
    const correct: CreateOperationInput = {
      kind: OperationKind.TRANSFER,
      fields: { dataTransferPackageId: A, sourceLocationId: B, destinationLocationId: C },
      by: 'ingest',
    };
    const withOptional: CreateOperationInput = {
      kind: OperationKind.LONG_TERM_ARCHIVE,
      fields: {
        rawDataPackageId: A,
        sourceLocationId: B,
        destinationLocationId: C,
        archiveKey: null,
      },
    };
    const misspelt: CreateOperationInput = {
      kind: OperationKind.TRANSFER,
      fields: {
        dataTransferPackageId: A,
        sourceLocationId: B,
        // @ts-expect-error: 'destinatonLocationId' is no field of TRANSFER
        destinatonLocationId: C,
      },
    };
    const missing: CreateOperationInput = {
      kind: OperationKind.TRANSFER,
      // @ts-expect-error: TRANSFER requires destinationLocationId
      fields: { dataTransferPackageId: A, sourceLocationId: B },
    };
    const foreign: CreateOperationInput = {
      kind: OperationKind.TRANSFER,
      fields: {
        dataTransferPackageId: A,
        sourceLocationId: B,
        destinationLocationId: C,
        // @ts-expect-error: archiveKey belongs to LONG_TERM_ARCHIVE, not TRANSFER
        archiveKey: 'k',
      },
    };
    const notText: CreateOperationInput = {
      kind: OperationKind.UNPACK,
      // @ts-expect-error: a location id is a string (a uuid), not a number
      fields: { dataTransferPackageId: A, locationId: 7 },
    };
    expect([correct, withOptional, misspelt, missing, foreign, notText]).toHaveLength(6);
  });

  it('checks the fields where they are written: at the call to submit', () => {
    const compileOnly = (runtime: Runtime) => [
      runtime.submit({
        kind: OperationKind.STAGING,
        fields: { rawDataPackageId: A, sourceLocationId: B, destinationLocationId: C },
      }),
      runtime.submit({
        kind: OperationKind.STAGING,
        fields: {
          rawDataPackageId: A,
          sourceLocationId: B,
          destinationLocationId: C,
          // @ts-expect-error: no such field
          locationId: C,
        },
      }),
      runtime.submitMany([
        // @ts-expect-error: RAW_DATA_PACKAGE requires locationId
        { kind: OperationKind.RAW_DATA_PACKAGE, fields: { rawDataPackageId: A } },
      ]),
    ];
    expect(compileOnly).toBeTypeOf('function');
  });

  it('lets a helper typed for one kind build its requests', () => {
    const archiveOf = (pkg: string): CreateOperationInput<OperationKind.LONG_TERM_ARCHIVE> => ({
      kind: OperationKind.LONG_TERM_ARCHIVE,
      fields: { rawDataPackageId: pkg, sourceLocationId: B, destinationLocationId: C },
    });
    const many: CreateOperationInput[] = [A, B].map(archiveOf);
    expect(many.map((i) => i.kind)).toEqual(['long_term_archive', 'long_term_archive']);
  });
});
