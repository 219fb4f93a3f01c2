import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The rooms of the house, bottom to top (docs/architecture.md). A file may import from its own
 * room and from any room below it, never from a room beside or above it; type-only imports count.
 */
const ROOMS: readonly (readonly string[])[] = [
  ['machines'],
  ['persistence', 'transport'],
  ['observe'],
  ['loops'],
  ['worker', 'control-plane', 'deleter'],
  ['runtime'],
  ['stages'],
  ['dashboard'],
  ['cli'],
];
const ENTRIES = ['index.ts', 'testing.ts', 'internal.ts'];
const ROOT = fileURLToPath(new URL('..', import.meta.url));

const rankOf = new Map(ROOMS.flatMap((rooms, rank) => rooms.map((r) => [r, rank] as const)));

function sourcesUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'vendor' || name === 'migrations') return [];
    if (statSync(join(ROOT, path)).isDirectory()) return sourcesUnder(path);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Every relative module specifier a file imports or re-exports, resolved to a repository path. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    const spec =
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier
        ? node.moduleSpecifier
        : ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword
          ? node.arguments[0]
          : undefined;
    if (spec && ts.isStringLiteral(spec) && spec.text.startsWith('.')) {
      found.push(relative(ROOT, resolve(ROOT, dirname(file), spec.text)));
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const roomOf = (file: string) => file.split('/')[0] ?? file;

const files = [...ROOMS.flat().flatMap(sourcesUnder), ...ENTRIES];
const graph = new Map(files.map((f) => [f, importsOf(f)]));

/** Outside the stack: they use it as a user or an operator would, through the same doors. */
const OUTSIDE = ['test', 'bench', 'chaos', 'scripts', 'examples'];
const outsideGraph = new Map(OUTSIDE.flatMap(sourcesUnder).map((f) => [f, importsOf(f)]));

/** The statement modules behind the repositories and reads, private to `persistence/`. */
const STATEMENTS = 'persistence/sql';
/** Files that may import a statement: the room itself, and the tests of the statements. */
const MAY_IMPORT_STATEMENTS = ['persistence/', 'test/persistence/'];

/** Imports of a statement module from a file outside `persistence/` (its own tests excepted). */
function statementImports(): string[] {
  const found: string[] = [];
  for (const [from, targets] of [...graph, ...outsideGraph]) {
    if (MAY_IMPORT_STATEMENTS.some((prefix) => from.startsWith(prefix))) continue;
    for (const to of targets) {
      if (to === STATEMENTS || to.startsWith(`${STATEMENTS}/`)) found.push(`${from} → ${to}`);
    }
  }
  return found;
}

/** Strongly connected components of more than one file, or a file that imports itself. */
function cycles(): string[][] {
  let index = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (v: string) => {
    order.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!order.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) ?? 0, order.get(w) ?? 0));
      }
    }
    if (low.get(v) === order.get(v)) {
      const component: string[] = [];
      let w: string | undefined;
      do {
        w = stack.pop();
        if (w === undefined) break;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const f of graph.keys()) if (!order.has(f)) connect(f);
  return found;
}

/** Imports that point at a room beside or above the importer's (the entries may import any). */
function upwardArrows(): string[] {
  const upward: string[] = [];
  for (const [from, targets] of graph) {
    const fromRank = rankOf.get(roomOf(from));
    if (fromRank === undefined) continue;
    for (const to of targets) {
      const toRank = rankOf.get(roomOf(to));
      if (toRank === undefined) upward.push(`${from} → ${to} (not a room)`);
      else if (roomOf(to) !== roomOf(from) && toRank >= fromRank) upward.push(`${from} → ${to}`);
    }
  }
  return upward;
}

describe('the rooms and their arrows', () => {
  it('sees every room and the entries', () => {
    for (const room of ROOMS.flat()) {
      expect(files.some((f) => roomOf(f) === room)).toBe(true);
    }
    expect(files.length).toBeGreaterThan(250);
    for (const dir of OUTSIDE) {
      expect([...outsideGraph.keys()].some((f) => roomOf(f) === dir)).toBe(true);
    }
  });

  it('no file imports from a room beside or above its own', () => {
    expect(upwardArrows()).toEqual([]);
  });

  it('no import loop between files', () => {
    expect(cycles()).toEqual([]);
  });

  it('the check sees a loop and an arrow up when there is one', () => {
    graph.set('worker/__probe_a.ts', ['worker/__probe_b.ts']);
    graph.set('worker/__probe_b.ts', ['worker/__probe_a.ts']);
    graph.set('machines/__probe_c.ts', ['worker/Worker.ts']);
    graph.set('worker/__probe_d.ts', ['control-plane/ControlPlane.ts']);
    try {
      expect(cycles()).toEqual([['worker/__probe_a.ts', 'worker/__probe_b.ts']]);
      expect(upwardArrows()).toEqual([
        'machines/__probe_c.ts → worker/Worker.ts',
        'worker/__probe_d.ts → control-plane/ControlPlane.ts',
      ]);
    } finally {
      for (const probe of ['a', 'b', 'c', 'd'])
        graph.delete(`${probe === 'c' ? 'machines' : 'worker'}/__probe_${probe}.ts`);
    }
  });

  it('no file outside persistence/ imports a statement module (persistence/sql/)', () => {
    expect(statementImports()).toEqual([]);
  });

  it('the check sees a statement imported from outside persistence/ when there is one', () => {
    const probes: [Map<string, string[]>, string, string[]][] = [
      [graph, 'dashboard/__probe_e.ts', ['persistence/sql/selectAttention.ts']],
      [outsideGraph, 'test/dashboard/__probe_f.ts', ['persistence/sql/dispatchRelay.ts']],
      [outsideGraph, 'bench/__probe_g.ts', ['persistence/sql']],
      // Allowed: the room itself and the statements' own tests; a read is not a statement.
      [graph, 'persistence/__probe_h.ts', ['persistence/sql/dispatchRelay.ts']],
      [outsideGraph, 'test/persistence/__probe_i.ts', ['persistence/sql/dispatchRelay.ts']],
      [graph, 'cli/__probe_j.ts', ['persistence/reads/searchOperations.ts']],
    ];
    for (const [map, file, targets] of probes) map.set(file, targets);
    try {
      expect(statementImports()).toEqual([
        'dashboard/__probe_e.ts → persistence/sql/selectAttention.ts',
        'test/dashboard/__probe_f.ts → persistence/sql/dispatchRelay.ts',
        'bench/__probe_g.ts → persistence/sql',
      ]);
    } finally {
      for (const [map, file] of probes) map.delete(file);
    }
  });
});
