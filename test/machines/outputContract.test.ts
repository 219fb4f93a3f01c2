import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ArtifactType } from '../../machines/ArtifactType.ts';
import { classifyFailure } from '../../machines/classifyFailure.ts';
import {
  type ContractFacts,
  missingOutputs,
  outputContractError,
  type ProducedCopy,
  requiredOutputs,
} from '../../machines/missingOutputs.ts';
import { OPERATION_KINDS, OperationKind } from '../../machines/OperationKind.ts';
import { OpstateErrorCode } from '../../machines/OpstateError.ts';
import { membersFieldOf, OUTPUT_CONTRACT } from '../../machines/outputContract.ts';
import { outputContractTable } from '../../machines/outputContractTable.ts';
import { SUBTYPE_SPEC } from '../../persistence/subtypeFields.ts';

const PKG = '0190c3d2-7a4e-4b8e-9f10-000000000001';
const PKG2 = '0190c3d2-7a4e-4b8e-9f10-000000000002';
const DTP = '0190c3d2-7a4e-4b8e-9f10-0000000000d7';
const HERE = '0190c3d2-7a4e-4b8e-9f10-00000000a001';
const SRC = '0190c3d2-7a4e-4b8e-9f10-00000000a002';
const DST = '0190c3d2-7a4e-4b8e-9f10-00000000a003';
const OP = '0190c3d2-7a4e-4b8e-9f10-0000000000ff';

const pkgAt = (id: string, locationId: string): ProducedCopy => ({
  artifactType: ArtifactType.RAW_DATA_PACKAGE,
  artifactId: id,
  locationId,
});
const dtpAt = (locationId: string): ProducedCopy => ({
  artifactType: ArtifactType.DATA_TRANSFER_PACKAGE,
  artifactId: DTP,
  locationId,
});

/**
 * Per kind, written out by hand (not derived from the contract): its facts, what a right handler
 * returns, and how its required copy is named in a message.
 */
const CASES: Record<
  OperationKind,
  { facts: ContractFacts; right: ProducedCopy[]; names: string[]; wrongPlace: ProducedCopy[] }
> = {
  [OperationKind.RAW_DATA_PACKAGE]: {
    facts: { fields: { rawDataPackageId: PKG, locationId: HERE }, members: [] },
    right: [pkgAt(PKG, HERE)],
    names: [`raw_data_package ${PKG} (rawDataPackageId) at location ${HERE} (locationId)`],
    wrongPlace: [pkgAt(PKG, SRC)],
  },
  [OperationKind.DATA_TRANSFER_PACKAGE]: {
    facts: { fields: { dataTransferPackageId: DTP, locationId: HERE }, members: [] },
    right: [dtpAt(HERE)],
    names: [
      `data_transfer_package ${DTP} (dataTransferPackageId) at location ${HERE} (locationId)`,
    ],
    wrongPlace: [dtpAt(DST)],
  },
  [OperationKind.TRANSFER]: {
    facts: {
      fields: { dataTransferPackageId: DTP, sourceLocationId: SRC, destinationLocationId: DST },
      members: [],
    },
    right: [dtpAt(DST)],
    names: [
      `data_transfer_package ${DTP} (dataTransferPackageId) at location ${DST} (destinationLocationId)`,
    ],
    wrongPlace: [dtpAt(SRC)],
  },
  [OperationKind.UNPACK]: {
    facts: { fields: { dataTransferPackageId: DTP, locationId: HERE }, members: [PKG, PKG2] },
    right: [pkgAt(PKG, HERE), pkgAt(PKG2, HERE)],
    names: [
      `raw_data_package ${PKG} (a member of data transfer package ${DTP}, dataTransferPackageId) at location ${HERE} (locationId)`,
      `raw_data_package ${PKG2} (a member of data transfer package ${DTP}, dataTransferPackageId) at location ${HERE} (locationId)`,
    ],
    wrongPlace: [pkgAt(PKG, SRC), pkgAt(PKG2, SRC)],
  },
  [OperationKind.LONG_TERM_ARCHIVE]: {
    facts: {
      fields: {
        rawDataPackageId: PKG,
        sourceLocationId: SRC,
        destinationLocationId: DST,
        archiveKey: null,
      },
      members: [],
      archive: { state: 'VERIFIED', contentSha256: 'ab'.repeat(32) },
    },
    right: [pkgAt(PKG, DST)],
    names: [
      `raw_data_package ${PKG} (rawDataPackageId) at location ${DST} (destinationLocationId)`,
    ],
    wrongPlace: [pkgAt(PKG, SRC)],
  },
  [OperationKind.STAGING]: {
    facts: {
      fields: { rawDataPackageId: PKG, sourceLocationId: SRC, destinationLocationId: DST },
      members: [],
    },
    right: [pkgAt(PKG, DST)],
    names: [
      `raw_data_package ${PKG} (rawDataPackageId) at location ${DST} (destinationLocationId)`,
    ],
    wrongPlace: [pkgAt(PKG, SRC)],
  },
};

const otherType = (c: ProducedCopy): ProducedCopy => ({
  ...c,
  artifactType:
    c.artifactType === ArtifactType.RAW_DATA_PACKAGE
      ? ArtifactType.DATA_TRANSFER_PACKAGE
      : ArtifactType.RAW_DATA_PACKAGE,
});
const otherId = (c: ProducedCopy): ProducedCopy => ({
  ...c,
  artifactId: '0190c3d2-7a4e-4b8e-9f10-0000000000ee',
});

describe.each(OPERATION_KINDS)('the output contract of %s', (kind) => {
  const c = CASES[kind];
  const missing = (outputs: ProducedCopy[]) =>
    missingOutputs(kind, c.facts, outputs).map((m) => m.description);

  it('is met by what the kind must produce, alone, with extras, or with ids in upper case', () => {
    expect(missing(c.right)).toEqual([]);
    expect(missing([...c.right, pkgAt(PKG2, SRC), dtpAt(HERE)])).toEqual([]);
    expect(
      missing(
        c.right.map((o) => ({
          ...o,
          artifactId: o.artifactId.toUpperCase(),
          locationId: o.locationId.toUpperCase(),
        })),
      ),
    ).toEqual([]);
    expect(requiredOutputs(kind, c.facts)).toEqual(c.right);
  });

  it.each([
    ['no outputs at all', () => []],
    ['the right artifact at the wrong location', () => c.wrongPlace],
    ['another artifact type', () => c.right.map(otherType)],
    ['another artifact', () => c.right.map(otherId)],
  ] as const)(
    'is missed by %s, naming each copy with its kind, artifact and location',
    (_, outputs) => {
      expect(missing(outputs())).toEqual(c.names);
      const err = outputContractError(kind, OP, missingOutputs(kind, c.facts, outputs()));
      expect(err).toMatchObject({ code: OpstateErrorCode.OUTPUT_CONTRACT, retryable: false });
      expect(err.message).toContain(`${kind} operation ${OP} returned without`);
      for (const name of c.names) expect(err.message).toContain(name);
      expect(classifyFailure(err)).toBe('refused');
    },
  );
});

describe('the long-term archive contract: a VERIFIED archive record', () => {
  const facts = CASES[OperationKind.LONG_TERM_ARCHIVE].facts;
  const copy = { ...pkgAt(PKG, DST), checksum: `sha256:${'ab'.repeat(32)}` };
  const missing = (f: ContractFacts, outputs: ProducedCopy[]) =>
    missingOutputs(OperationKind.LONG_TERM_ARCHIVE, f, outputs);

  it('is met when the record ends with VERIFIED and the copy carries the verified checksum', () => {
    expect(missing(facts, [copy])).toEqual([]);
  });

  it.each([
    ['no archive record', null, 'the operation has no archive record'],
    [
      'a record ending at UPLOADED',
      'UPLOADED',
      "the operation's archive record ends with UPLOADED",
    ],
    ['a failed verification', 'VERIFY_FAILED', 'archive record ends with VERIFY_FAILED'],
    ['a CONFLICT', 'CONFLICT', 'archive record ends with CONFLICT'],
  ] as const)('is missed with %s, naming what is missing and the fix', (_, state, why) => {
    const found = missing({ ...facts, archive: { state, contentSha256: null } }, [copy]);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({
      artifactType: 'raw_data_package',
      artifactId: PKG,
      locationId: DST,
    });
    const err = outputContractError(OperationKind.LONG_TERM_ARCHIVE, OP, found);
    expect(err).toMatchObject({ code: OpstateErrorCode.OUTPUT_CONTRACT, retryable: false });
    expect(err.message).toContain(
      `a VERIFIED archive record of raw_data_package ${PKG} at location ${DST}`,
    );
    expect(err.message).toContain(why);
    expect(err.message).toContain('defineArchiveStage');
    expect(classifyFailure(err)).toBe('refused');
  });

  it('is missed when the facts were not read at all (absent is not verified)', () => {
    const { archive: _archive, ...without } = facts;
    expect(
      missing(without, [copy])
        .map((m) => m.description)
        .join(),
    ).toContain('the operation has no archive record');
  });

  it('is missed when the copy returned carries another checksum than the verified package', () => {
    const found = missing(facts, [{ ...copy, checksum: `sha256:${'cd'.repeat(32)}` }]);
    expect(found.map((m) => m.description).join()).toContain(
      `the copy returned carries checksum sha256:${'cd'.repeat(32)}`,
    );
  });
});

describe('the unpack contract', () => {
  const facts = CASES[OperationKind.UNPACK].facts;

  it('names only the member that is missing when one of two is returned', () => {
    const missing = missingOutputs(OperationKind.UNPACK, facts, [pkgAt(PKG, HERE)]);
    expect(missing.map((m) => [m.artifactType, m.artifactId, m.locationId])).toEqual([
      ['raw_data_package', PKG2, HERE],
    ]);
    const err = outputContractError(OperationKind.UNPACK, OP, missing);
    expect(err.message).toContain(
      `returned without an output its kind must produce: raw_data_package ${PKG2}`,
    );
    expect(err.message).not.toContain(`raw_data_package ${PKG} `);
    expect(err.details.missing).toEqual([
      { artifactType: 'raw_data_package', artifactId: PKG2, locationId: HERE },
    ]);
  });

  it('is never met for a transfer package with no recorded member, and says how to fix it', () => {
    const empty = { ...facts, members: [] };
    expect(requiredOutputs(OperationKind.UNPACK, empty)).toEqual([]);
    for (const outputs of [[], [pkgAt(PKG, HERE)]]) {
      const [m, ...rest] = missingOutputs(OperationKind.UNPACK, empty, outputs);
      expect(rest).toEqual([]);
      expect(m).toMatchObject({
        artifactType: 'raw_data_package',
        artifactId: null,
        locationId: HERE,
      });
      expect(m?.description).toContain(
        `data transfer package ${DTP} (dataTransferPackageId), and none is recorded there`,
      );
      expect(m?.description).toContain('assignPackages');
    }
  });

  it('names the first 6 of many missing members, counts the rest, and stays under 2,000 characters', () => {
    const members = Array.from(
      { length: 25 },
      (_, i) => `0190c3d2-7a4e-4b8e-9f10-${String(i).padStart(12, '0')}`,
    );
    const missing = missingOutputs(OperationKind.UNPACK, { ...facts, members }, []);
    expect(missing).toHaveLength(25);
    const err = outputContractError(OperationKind.UNPACK, OP, missing);
    expect(err.message).toContain('returned without 25 outputs');
    expect(err.message).toContain(members[5] as string);
    expect(err.message).not.toContain(members[6] as string);
    expect(err.message).toContain('; and 19 more.');
    expect(err.message.length).toBeLessThan(2000);
  });
});

describe('the contract table', () => {
  it("documents every kind's fields exactly as its subtype table has them", () => {
    for (const kind of OPERATION_KINDS) {
      expect(
        OUTPUT_CONTRACT[kind].fields.map((f) => [f.key, !f.optional]),
        kind,
      ).toEqual(SUBTYPE_SPEC[kind].fields.map((f) => [f.key, f.required]));
    }
  });

  it('names in each requirement only required uuid fields of its kind', () => {
    for (const kind of OPERATION_KINDS) {
      const uuidFields = SUBTYPE_SPEC[kind].fields
        .filter((f) => f.required && f.type === 'uuid')
        .map((f) => f.key);
      for (const r of OUTPUT_CONTRACT[kind].outputs) {
        const named = r.produce === 'members' ? [r.membersOf] : [r.artifactField];
        for (const key of [...named, r.locationField]) expect(uuidFields, kind).toContain(key);
      }
    }
    expect(OPERATION_KINDS.filter((k) => membersFieldOf(k) !== undefined)).toEqual([
      OperationKind.UNPACK,
    ]);
  });

  it('is in the README as rendered from the contract', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const table = outputContractTable();
    expect(table.split('\n')).toHaveLength(2 + OPERATION_KINDS.length);
    // When this fails, paste the output of outputContractTable() into the README's kinds table.
    expect(readme).toContain(`\n${table}\n`);
  });
});
