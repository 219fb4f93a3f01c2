import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/opstateCli.ts';

/**
 * Each entry's export list, held to a checked-in snapshot (`test/package/exports/<entry>.txt`),
 * so that a name added to or dropped from `opstate`, `opstate/testing` or `opstate/internal` is a
 * reviewed change. A line is a name the entry exports at run time, or `type Name` for a name that
 * exists only in the types; sorted.
 */
const ENTRIES = [
  { file: 'index.ts', snapshot: 'opstate.txt' },
  { file: 'testing.ts', snapshot: 'testing.txt' },
  { file: 'internal.ts', snapshot: 'internal.txt' },
] as const;

const SNAPSHOTS = join(REPO_ROOT, 'test', 'package', 'exports');
const UPDATE = 'UPDATE_EXPORTS=1 npx vitest run test/package/exports.test.ts';

/** Every export of each entry, through the compiler: `name` for a value, `type name` for a type. */
function exportLists(): Map<string, string[]> {
  const program = ts.createProgram(
    ENTRIES.map((e) => join(REPO_ROOT, e.file)),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      allowImportingTsExtensions: true,
      noEmit: true,
      strict: true,
      skipLibCheck: true,
      types: ['node'],
    },
  );
  const checker = program.getTypeChecker();
  const lists = new Map<string, string[]>();
  for (const entry of ENTRIES) {
    const source = program.getSourceFile(join(REPO_ROOT, entry.file));
    const symbol = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    if (symbol === undefined) throw new Error(`${entry.file} is not a module`);
    const names = checker.getExportsOfModule(symbol).map((s) => {
      const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s;
      // A type-only re-export (`export type { X }`) is no value, whatever X is where it is declared.
      const typeOnly = s.declarations?.some((d) => ts.isTypeOnlyExportDeclaration(d)) ?? false;
      return !typeOnly && target.flags & ts.SymbolFlags.Value ? s.name : `type ${s.name}`;
    });
    lists.set(
      entry.file,
      names.sort((a, b) => nameOf(a).localeCompare(nameOf(b))),
    );
  }
  return lists;
}

const nameOf = (line: string) => line.replace(/^type /, '');

const lists = exportLists();

describe('the export list of each entry', () => {
  for (const entry of ENTRIES) {
    it(`${entry.file} exports what test/package/exports/${entry.snapshot} lists`, async () => {
      const listed = lists.get(entry.file) ?? [];
      const path = join(SNAPSHOTS, entry.snapshot);
      if (process.env.UPDATE_EXPORTS === '1') writeFileSync(path, `${listed.join('\n')}\n`);
      const snapshot = existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n') : [];
      expect(
        listed,
        `${entry.file}'s exports differ from ${relative(REPO_ROOT, path)}; if the change is meant, update the snapshot (${UPDATE}) and commit it with the change`,
      ).toEqual(snapshot);
      // The values the compiler sees are the names the module has when it runs.
      const module = (await import(join(REPO_ROOT, entry.file))) as Record<string, unknown>;
      expect(Object.keys(module).sort()).toEqual(
        listed.filter((l) => !l.startsWith('type ')).sort(),
      );
    });
  }

  it('the public entry stays small: at most 66 names, types included', () => {
    expect(lists.get('index.ts')?.length).toBeLessThanOrEqual(66);
  });
});

/** The declaration files a built entry reaches, and the packages each of them imports. */
function declarationImports(entry: string): Map<string, string[]> {
  const reached = new Map<string, string[]>();
  const queue = [join(REPO_ROOT, 'dist', entry)];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (reached.has(file)) continue;
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
    const packages: string[] = [];
    reached.set(file, packages);
    const visit = (node: ts.Node) => {
      const spec =
        (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier
          ? node.moduleSpecifier
          : ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)
            ? node.argument.literal
            : undefined;
      if (spec !== undefined && ts.isStringLiteral(spec)) {
        if (spec.text.startsWith('.')) {
          queue.push(join(dirname(file), spec.text.replace(/\.(ts|js)$/, '.d.ts')));
        } else {
          packages.push(spec.text);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return reached;
}

/** `file → package` for every reached declaration file importing a drizzle module. */
function drizzleImports(entry: string): string[] {
  return [...declarationImports(entry)].flatMap(([file, packages]) =>
    packages
      .filter((p) => p === 'drizzle-orm' || p.startsWith('drizzle-orm/'))
      .map((p) => `${relative(join(REPO_ROOT, 'dist'), file)} → ${p}`),
  );
}

describe('the published declarations of opstate and opstate/testing', () => {
  // The global setup rebuilt dist/ from the current sources.
  it('reach no drizzle type, so a consumer checking every library compiles', () => {
    expect(drizzleImports('index.d.ts')).toEqual([]);
    expect(drizzleImports('testing.d.ts')).toEqual([]);
  });

  it('the walk finds drizzle where it is: behind opstate/internal', () => {
    expect(drizzleImports('internal.d.ts').length).toBeGreaterThan(0);
  });
});
