import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/** One property of an interface or type literal as its source declares it. */
export interface TypeMember {
  readonly name: string;
  /** The declared type, as written. */
  readonly type: string;
  readonly optional: boolean;
  /** Its TSDoc comment on one line (empty when it has none). */
  readonly doc: string;
}

const REPO_ROOT = new URL('../', import.meta.url);

function docOf(node: ts.Node): string {
  const docs = (node as { jsDoc?: ts.JSDoc[] }).jsDoc ?? [];
  return docs
    .map((d) => ts.getTextOfJSDocComment(d.comment) ?? '')
    .join(' ')
    .replace(/\s+/g, ' ')
    .trim();
}

function membersOf(elements: readonly ts.TypeElement[], source: ts.SourceFile): TypeMember[] {
  return elements
    .filter((e): e is ts.PropertySignature => ts.isPropertySignature(e))
    .map(
      (p): TypeMember => ({
        name: p.name.getText(source),
        type: p.type?.getText(source).replace(/\s+/g, ' ') ?? 'unknown',
        optional: p.questionToken !== undefined,
        doc: docOf(p),
      }),
    );
}

/**
 * The properties of an exported interface, or of the type literals in an exported type alias
 * (`A & B & { … }` gives the literal's), read from the source file with their TSDoc: the
 * generated reference pages take each setting's documentation from the code that declares it.
 *
 * @example
 * ```ts
 * typeMembers('runtime/RuntimeOptions.ts', 'RuntimeOptions'); // [{ name: 'databaseUrl', doc: 'Postgres URL; …' }, …]
 * ```
 */
export function typeMembers(file: string, name: string): TypeMember[] {
  const path = new URL(file, REPO_ROOT);
  const source = ts.createSourceFile(
    file,
    readFileSync(path, 'utf8'),
    ts.ScriptTarget.ES2022,
    true,
  );
  for (const statement of source.statements) {
    if (ts.isInterfaceDeclaration(statement) && statement.name.text === name) {
      return membersOf(statement.members, source);
    }
    if (ts.isTypeAliasDeclaration(statement) && statement.name.text === name) {
      const parts: readonly ts.TypeNode[] = ts.isIntersectionTypeNode(statement.type)
        ? statement.type.types
        : [statement.type];
      return parts
        .filter((t): t is ts.TypeLiteralNode => ts.isTypeLiteralNode(t))
        .flatMap((t) => membersOf(t.members, source));
    }
  }
  throw new OpstateError(
    OpstateErrorCode.BAD_INPUT,
    `${file} declares no interface or type ${name}; point the reference at where it moved`,
  );
}
