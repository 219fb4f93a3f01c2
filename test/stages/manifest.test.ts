import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { checkMemberName } from '../../stages/memberName.ts';
import {
  MANIFEST_NAME,
  MAX_MANIFEST_BYTES,
  type Manifest,
  manifestBytes,
  manifestOf,
  packageWithManifest,
  readPackage,
  writePackage,
} from '../../stages/packageFormat.ts';
import { parseManifest } from '../../stages/packageSource.ts';
import { packTar, type TarMember } from '../../stages/tar.ts';
import {
  anyJsonValue,
  deepArray,
  expectNoPollution,
  expectRefused,
  hostileJsonText,
  parseOrRefuse,
} from '../helpers/hostileInput.ts';

const { BAD_INPUT } = OpstateErrorCode;

/** Names a folder listing or a crafted manifest may hold: paths, dots, controls, any Unicode. */
const nameArb: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 120 }),
  fc.stringMatching(/^[A-Za-z0-9_.-]{1,40}$/),
  fc
    .array(fc.constantFrom('..', '.', '/', '\\', 'a', 'é', '日', '\u0000', '\u001f', '\ud800'), {
      maxLength: 8,
    })
    .map((parts) => parts.join('')),
);

/** A name `checkMemberName` accepts, and every rule it promises. */
function expectPlainName(name: string): void {
  expect(name).not.toBe('');
  expect(['.', '..']).not.toContain(name);
  expect(name).not.toMatch(/[/\\]/);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
  expect(name).not.toMatch(/[\u0000-\u001f\u007f]/);
  expect(Buffer.byteLength(name)).toBeLessThanOrEqual(99);
  expect(Buffer.from(name, 'utf8').toString('utf8')).toBe(name);
}

/** Every rule `parseManifest` promises of what it returns. */
function expectCheckedManifest(manifest: Manifest): void {
  const names = manifest.members.map((m) => m.name);
  for (const m of manifest.members) {
    expectPlainName(m.name);
    expect(Number.isSafeInteger(m.size)).toBe(true);
    expect(typeof m.sha256).toBe('string');
  }
  expect(new Set(names).size).toBe(names.length);
  expect(names).not.toContain(MANIFEST_NAME);
}

const goodMemberArb: fc.Arbitrary<TarMember> = fc.record({
  name: fc
    .string({ unit: 'grapheme', minLength: 1, maxLength: 30 })
    .filter((n) => n !== MANIFEST_NAME)
    .filter((n) => !(checkOrRefuse(n) instanceof OpstateError)),
  data: fc.uint8Array({ maxLength: 600 }),
});
const membersArb = fc.uniqueArray(goodMemberArb, { maxLength: 4, selector: (m) => m.name });

function checkOrRefuse(name: unknown): string | OpstateError {
  return parseOrRefuse(() => checkMemberName(name, 'test'), BAD_INPUT);
}

/** One manifest entry's text: well-formed, or with hostile JSON in any field, or hostile itself. */
const entryTextArb: fc.Arbitrary<string> = fc.oneof(
  fc
    .record({
      name: nameArb,
      size: fc.integer(),
      sha256: fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), maxLength: 64 }),
    })
    .map((e) => JSON.stringify(e)),
  fc
    .tuple(hostileJsonText, fc.constantFrom('name', 'size', 'sha256'))
    .map(
      ([bad, field]) =>
        `{"name":${field === 'name' ? bad : '"a"'},"size":${field === 'size' ? bad : 1},"sha256":${field === 'sha256' ? bad : '"ab"'}}`,
    ),
  hostileJsonText,
);

/** A MANIFEST.json's bytes: valid, any JSON, hostile entries, random bytes, or a mutation. */
const manifestTextArb: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.array(entryTextArb, { maxLength: 5 }).map((e) => Buffer.from(`{"members":[${e.join(',')}]}`)),
  fc.json({ maxDepth: 4 }).map((t) => Buffer.from(t)),
  hostileJsonText.map((t) => Buffer.from(`{"members":${t}}`)),
  fc.uint8Array({ maxLength: 2048 }),
  fc
    .tuple(membersArb, fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 8 }))
    .map(([members, at, bytes]) => {
      const text = Buffer.from(manifestBytes(manifestOf(members).members));
      text.set(bytes.subarray(0, text.length - (at % text.length)), at % text.length);
      return text;
    }),
);

afterEach(() => {
  vi.restoreAllMocks();
});

describe('member names', () => {
  it('returns a plain file name or refuses with BAD_INPUT, whatever the name holds', () => {
    fc.assert(
      fc.property(fc.oneof(nameArb, anyJsonValue), (name) => {
        const r = checkOrRefuse(name);
        if (!(r instanceof OpstateError)) {
          expect(r).toBe(name);
          expectPlainName(r);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('refuses a name that is not a string however it is built (it used to throw a TypeError or overflow the stack)', () => {
    // `String({ toString: 1 })` throws a TypeError; a name nested 500,000 arrays deep (1 MiB of
    // manifest) overflowed the stack of the JSON.stringify that printed it.
    for (const text of ['{"toString":1}', '{"valueOf":{},"toString":{}}', deepArray(500_000)]) {
      expectRefused(checkOrRefuse(JSON.parse(text)), BAD_INPUT, /it is not a string/);
    }
  });

  it('refuses a lone surrogate, which has no UTF-8 form to write in a tar header', () => {
    expectRefused(checkOrRefuse('a\ud800b'), BAD_INPUT, /not well-formed Unicode/);
  });
});

describe('a folder MANIFEST.json (parseManifest)', () => {
  it('returns a manifest every entry of which is checked, or refuses with BAD_INPUT', () => {
    fc.assert(
      fc.property(manifestTextArb, (bytes) => {
        const r = parseOrRefuse(() => parseManifest(Buffer.from(bytes), 'pkg'), BAD_INPUT);
        if (!(r instanceof OpstateError)) expectCheckedManifest(r);
        expectNoPollution();
      }),
      { numRuns: 300 },
    );
  });

  it('reads back what manifestBytes writes, byte for byte', () => {
    fc.assert(
      fc.property(membersArb, (members) => {
        const bytes = manifestBytes(manifestOf(members).members);
        const manifest = parseManifest(bytes, 'pkg');
        expect(manifest.members).toEqual(manifestOf(members).members);
        expect(manifestBytes(manifest.members).equals(bytes)).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('refuses a hostile name at any depth of 1 MiB without another error', () => {
    const deep = Buffer.from(`{"members":[{"name":${deepArray(500_000)},"size":1,"sha256":"a"}]}`);
    expect(deep.length).toBeGreaterThan(1_000_000);
    expectRefused(
      parseOrRefuse(() => parseManifest(deep, 'pkg'), BAD_INPUT),
      BAD_INPUT,
      /is not a string/,
    );
  });
});

describe('a package (readPackage)', () => {
  it('returns the members its manifest lists, or refuses with BAD_INPUT, whatever the manifest holds', () => {
    fc.assert(
      fc.property(manifestTextArb, membersArb, (manifest, members) => {
        const tar = packageWithManifest(manifest, members);
        const r = parseOrRefuse(() => readPackage(tar), BAD_INPUT);
        if (!(r instanceof OpstateError)) {
          expect(r.members.map((m) => m.name)).toEqual(members.map((m) => m.name));
          expect(manifestOf(r.members).members).toEqual(
            r.manifest.members.map(({ name, size, sha256 }) => ({ name, size, sha256 })),
          );
        }
        expectNoPollution();
      }),
      { numRuns: 300 },
    );
  });

  it('reads back any members it wrote, names in any script included (they used to be written as Latin-1)', () => {
    expect(
      readPackage(writePackage([{ name: 'é.fits', data: new Uint8Array(1) }])).members[0]?.name,
    ).toBe('é.fits');
    fc.assert(
      fc.property(membersArb, (members) => {
        const { manifest, members: read } = readPackage(writePackage(members));
        expect(read.map((m) => [m.name, Buffer.from(m.data).toString('hex')])).toEqual(
          members.map((m) => [m.name, Buffer.from(m.data).toString('hex')]),
        );
        expect(manifest).toEqual(manifestOf(members));
      }),
      { numRuns: 200 },
    );
  });

  it('refuses a manifest entry nested 500,000 deep with BAD_INPUT (it used to overflow the stack)', () => {
    const manifest = Buffer.from(`{"members":[{"name":${deepArray(500_000)}}]}`);
    expectRefused(
      parseOrRefuse(() => readPackage(packageWithManifest(manifest, [])), BAD_INPUT),
      BAD_INPUT,
      /its entry 0 is not \{ name, size, sha256 \}/,
    );
  });
});

describe('the manifest cap', () => {
  /** A valid manifest of no members, padded with spaces to `bytes`. */
  const padded = (bytes: number) => {
    const text = Buffer.alloc(bytes, ' ');
    text.write('{"members":[]}');
    return text;
  };

  it('refuses a MANIFEST.json over MAX_MANIFEST_BYTES by its size, before parsing it', () => {
    const parse = vi.spyOn(JSON, 'parse');
    for (const read of [
      (m: Buffer) => parseManifest(m, 'pkg'),
      // packTar, not packageWithManifest: that one refuses to write such a manifest.
      (m: Buffer) => readPackage(packTar([{ name: MANIFEST_NAME, data: m }])),
    ]) {
      expect(() => read(padded(MAX_MANIFEST_BYTES))).not.toThrow();
      parse.mockClear();
      const over = padded(MAX_MANIFEST_BYTES + 1);
      expectRefused(
        parseOrRefuse(() => read(over), BAD_INPUT),
        BAD_INPUT,
        new RegExp(
          `takes ${MAX_MANIFEST_BYTES + 1} bytes, over the ${MAX_MANIFEST_BYTES}-byte cap`,
        ),
      );
      expect(parse).not.toHaveBeenCalled();
    }
  });

  it('writes no package whose manifest readers would refuse', () => {
    const long = 'x'.repeat(90);
    // Entries of about 200 bytes each: enough of them to pass the cap.
    const count = Math.ceil(MAX_MANIFEST_BYTES / 150);
    const members = Array.from({ length: count }, (_, i) => ({
      name: `${long}${i}`,
      data: new Uint8Array(0),
    }));
    expectRefused(
      parseOrRefuse(() => writePackage(members), BAD_INPUT),
      BAD_INPUT,
      /over the \d+-byte cap that readers refuse above/,
    );
  });
});
