import { PHYSICAL_COPY_STATUSES } from '../../machines/physicalCopyMachine.ts';
import type { CopyStatusSummary } from '../../persistence/reads/selectCopyStatus.ts';
import type { Io } from '../Command.ts';

/**
 * Prints the copy section of `opstate status`: copies per location type × status, deletions in
 * progress with their holder and lease, and failed deletions with the operation to inspect.
 *
 * @example
 * ```ts
 * printCopyStatus(await selectCopyStatus(database), io);
 * ```
 */
export function printCopyStatus(s: CopyStatusSummary, io: Io): void {
  const types = Object.keys(s.copies).sort();
  if (types.length === 0) return;
  io.out('');
  io.out('physical copies (deletion after archive)');
  const width = Math.max(...types.map((t) => t.length), 'location type'.length);
  io.out(['location type'.padEnd(width), ...PHYSICAL_COPY_STATUSES].join('  '));
  for (const t of types) {
    const row = s.copies[t] as Record<string, number>;
    io.out(
      [
        t.padEnd(width),
        ...PHYSICAL_COPY_STATUSES.map((st) => String(row[st] ?? 0).padStart(st.length)),
      ].join('  '),
    );
  }
  for (const d of s.inProgress) {
    io.out(
      `  deleting ${d.copyId}: ${d.done}/${d.members} members, ${d.holder} epoch ${d.epoch}, lease ${d.leaseExpired ? 'EXPIRED' : 'until'} ${d.leaseUntil.toISOString()}, interruptions ${d.failures}`,
    );
  }
  for (const f of s.failed) {
    io.out(
      `  DELETION_FAILED ${f.copyId} (failures ${f.failures}): ${f.lastError ?? '-'}${f.archiveOperationId === null ? '' : `; see opstate inspect ${f.archiveOperationId}`}`,
    );
  }
}
