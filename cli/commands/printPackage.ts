import { type PackageClassification, STEP_LABEL } from '../../machines/classifyPackageStep.ts';
import { PACKAGE_STEPS } from '../../machines/packageState.ts';
import type { PackageRecord } from '../../persistence/reads/selectPackage.ts';
import type { Io } from '../Command.ts';

/** A package's operations in pipeline order (staging last), oldest first within a step. */
export function operationsInOrder(record: PackageRecord): PackageRecord['facts']['operations'] {
  const rank = (kind: keyof typeof PACKAGE_STEPS) => PACKAGE_STEPS[kind]?.rank ?? 99;
  return [...record.facts.operations].sort((a, b) => rank(a.kind) - rank(b.kind));
}

/**
 * `opstate inspect <package id> --json`: `{type, id, name, state, step: {kind, operationId,
 * location, wait, why}, transferPackage, members, files, filesTotal, operations, copies, rollbacks,
 * pipelineCursor}`.
 */
export function packageJson(record: PackageRecord, step: PackageClassification): unknown {
  const { state, ...rest } = step;
  return {
    type: record.facts.type,
    id: record.facts.id,
    name: record.name,
    state,
    step: rest,
    transferPackage: record.transferPackage,
    members: record.members,
    files: record.files,
    filesTotal: record.filesTotal,
    operations: operationsInOrder(record).map((o) => ({
      id: o.id,
      kind: o.kind,
      status: o.status,
      subjectId: o.subjectId,
      location: o.target,
      attempt: o.attempt,
      lastError: o.lastError,
    })),
    copies: record.copies,
    rollbacks: record.rollbacks,
    pipelineCursor: record.facts.pipelineCursor,
  };
}

/** `opstate inspect <package id>`: its derived state, its step and why, and its lineage. */
export function printPackage(record: PackageRecord, step: PackageClassification, io: Io): void {
  const f = record.facts;
  const names = new Map<string, string>([
    ...record.members.map((m) => [m.id, m.name] as const),
    [f.id, record.name],
    ...(record.transferPackage === null
      ? []
      : [[record.transferPackage.id, record.transferPackage.name] as const]),
  ]);
  io.out(`${f.type} ${f.id}  ${record.name}`);
  io.out(`  state       ${step.state} (derived from its operations and copies)`);
  io.out(
    `  step        ${step.kind === null ? '-' : STEP_LABEL[step.kind]}${step.location === null ? '' : ` at ${step.location}`}${step.operationId === null ? '' : ` (operation ${step.operationId})`}`,
  );
  io.out(`  why         ${step.wait}: ${step.why}`);
  io.out(
    `  transfer package  ${record.transferPackage === null ? 'none' : `${record.transferPackage.name} (${record.transferPackage.id})`}`,
  );
  if (record.members.length > 0) {
    io.out(`  members of the transfer package (${record.members.length})`);
    for (const m of record.members) {
      io.out(
        `    ${m.id}  ${m.name}${m.packaged ? '  packaged' : ''}${m.id === f.id ? '  (this one)' : ''}`,
      );
    }
  }
  io.out(`  files (${record.filesTotal})`);
  for (const file of record.files) io.out(`    ${file.id}  ${file.name}`);
  if (record.filesTotal > record.files.length) {
    io.out(`    … ${record.filesTotal - record.files.length} more`);
  }
  io.out(`  operations (${f.operations.length}), in pipeline order`);
  for (const o of operationsInOrder(record)) {
    const error = o.lastError === null ? '' : `  ${o.lastError.message}`;
    io.out(
      `    ${o.id}  ${o.kind.padEnd(21)}  ${o.status.padEnd(11)}  #${o.attempt}  ${names.get(o.subjectId) ?? o.subjectId} @ ${o.target ?? '-'}${error}`,
    );
  }
  if (record.rollbacks.length > 0) {
    io.out(`  rollbacks (${record.rollbacks.length}): their superseded operations are not listed`);
    for (const r of record.rollbacks) {
      io.out(
        `    ${r.id}  ${r.at.toISOString()}  ${names.get(r.artifactId) ?? r.artifactId} to '${r.stage}' by ${r.requestedBy}, ${r.redone} operations redone`,
      );
    }
  }
  io.out(`  copies (${record.copies.length})`);
  for (const c of record.copies) {
    io.out(
      `    ${c.artifactType} ${names.get(c.artifactId) ?? c.artifactId} @ ${c.location}  ${c.status}${c.path === null ? '' : `  ${c.path}`}`,
    );
  }
}
