import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The rooms of the running actors: worker, control plane, deleter, runtime, logs and loops. */
const ROOMS = ['worker', 'control-plane', 'deleter', 'runtime', 'observe', 'loops'];
/** About a screen and a half: a decision past this is a table of cases begging to be pure. */
const MAX_LINES = 100;

function functionLengths(file: string): { name: string; line: number; lines: number }[] {
  const text = readFileSync(`${ROOT}${file}`, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: { name: string; line: number; lines: number }[] = [];
  const visit = (node: ts.Node) => {
    if (
      ts.isFunctionDeclaration(node) ||
      ts.isFunctionExpression(node) ||
      ts.isArrowFunction(node) ||
      ts.isMethodDeclaration(node)
    ) {
      const start = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name = (node as { name?: ts.Node }).name?.getText(source) ?? '(anonymous)';
      found.push({ name: `${file}:${start + 1} ${name}`, line: start + 1, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('the actor rooms stay thin', () => {
  it(`no function in ${ROOMS.join(', ')} is longer than ${MAX_LINES} lines`, () => {
    const files = ROOMS.flatMap((room) =>
      readdirSync(`${ROOT}${room}`)
        .filter((f) => f.endsWith('.ts'))
        .map((f) => `${room}/${f}`),
    );
    const all = files.flatMap(functionLengths);
    expect(all.length).toBeGreaterThan(100); // the scan sees the layer's functions
    expect(
      all.filter((f) => f.lines > MAX_LINES).map((f) => `${f.name} (${f.lines} lines)`),
    ).toEqual([]);
  });
});
