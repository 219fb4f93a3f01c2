import type { ResumeRecord } from '../../persistence/resumeRecord.ts';
import type { Io } from '../Command.ts';

const iso = (d: Date | null | undefined) => (d == null ? '-' : d.toISOString());

/**
 * Prints an archive-then-delete resume record for `opstate inspect`: last durable state, source
 * and archive identity, deletion progress with every kept member's reason, the receipt, and the
 * next safe action on its own line.
 *
 * @example
 * ```ts
 * printResumeRecord(await loadResumeRecord(database, view), io);
 * ```
 */
export function printResumeRecord(r: ResumeRecord, io: Io): void {
  io.out('  resume record (archive then delete)');
  const last = r.lastDurable;
  io.out(
    `    last durable  ${last === null ? 'nothing recorded' : `${last.state} at ${iso(last.at)} by ${last.by}${last.attempt === null ? '' : ` (attempt ${last.attempt})`}`}`,
  );
  if (r.source !== null) {
    const s = r.source;
    io.out(`    source        copy ${s.copyId} (${s.locationType}) ${s.path ?? '-'}`);
    io.out(
      `                  ${s.checksum ?? 'no checksum'}, ${s.members ?? '?'} member(s), ${s.status}`,
    );
  }
  if (r.archive !== null) {
    const a = r.archive;
    io.out(`    archive       key ${a.key ?? '-'}, object version ${a.objectVersion ?? '-'}`);
    io.out(
      `                  object sha256 ${a.objectSha256 ?? '-'}, package ${a.contentSha256 ?? '-'} (${a.size ?? '?'} bytes)`,
    );
    io.out(
      `                  ${a.encrypted === true ? `encrypted (AES-256-GCM, key id ${a.keyId})` : 'not encrypted'}; verification ${a.verification ?? 'none'}`,
    );
  }
  const d = r.deletion;
  if (d !== null) {
    io.out(
      `    deletion      ${d.status}, plan ${d.plans}, failures ${d.failures}/${d.maxFailures}${d.lastError === null ? '' : ` (${d.lastError})`}`,
    );
    if (d.current !== null) {
      io.out(
        `                  holder ${d.current.holder} epoch ${d.current.epoch}, lease until ${iso(d.current.leaseUntil)}${d.leaseExpired ? ' (expired)' : ''}`,
      );
    }
    io.out(
      `                  deleted ${d.deleted.length}, missing ${d.missing.length}, kept ${d.kept.length}, remaining ${d.remaining.length}`,
    );
    for (const m of d.kept) io.out(`      kept     ${m.path}: ${m.reason}`);
    for (const m of d.missing) io.out(`      missing  ${m.path}: ${m.reason}`);
    for (const m of d.deleted) io.out(`      deleted  ${m.path} (${m.size} bytes)`);
    for (const m of d.remaining) io.out(`      remains  ${m.path}`);
  }
  if (r.receipt !== null) {
    const t = r.receipt;
    io.out(
      `    receipt       ${iso(t.at)} by ${t.by}: ${t.membersDeleted} deleted, ${t.membersMissing} missing, ${t.bytes} bytes; archive ${t.archiveKey} ${t.archiveDigest}`,
    );
  }
  io.out(`    records       ${r.records.map((x) => x.state).join(' → ') || '-'}`);
  io.out(`  next safe action: ${r.nextSafeAction}`);
}
