/**
 * The transitions an archive-then-delete batch records, in order, in its append-only archive
 * record. A restart reads the last durable one and resumes from there, never from the start:
 * - `PLANNED`: source manifest and digest recorded, nothing written yet;
 * - `UPLOADED`: the object is at its key (created now, or found identical from an earlier attempt);
 * - `READ_BACK`: the stored object read back with its recorded whole-object digest;
 * - `VERIFIED`: every member name, size and digest checked against the manifest;
 * - `SOURCE_REVALIDATED`: a deletion plan written after every source member was checked against the
 *   archived manifest (identity and digest);
 * - `DELETED`: every planned member has an outcome and none was kept;
 * - `RECEIPTED`: the durable receipt is written (the copy may then become DELETED).
 * Off the straight path: `CONFLICT` (another object at the key, never overwritten), `VERIFY_FAILED`
 * (a read-back or an independent verify found a difference: the source is kept), and
 * `DELETION_FAILED` (a member was kept, for an operator to review).
 */
export const ArchiveState = {
  PLANNED: 'PLANNED',
  UPLOADED: 'UPLOADED',
  READ_BACK: 'READ_BACK',
  VERIFIED: 'VERIFIED',
  SOURCE_REVALIDATED: 'SOURCE_REVALIDATED',
  DELETED: 'DELETED',
  RECEIPTED: 'RECEIPTED',
  CONFLICT: 'CONFLICT',
  VERIFY_FAILED: 'VERIFY_FAILED',
  DELETION_FAILED: 'DELETION_FAILED',
} as const;
export type ArchiveState = (typeof ArchiveState)[keyof typeof ArchiveState];
export const ARCHIVE_STATES: readonly ArchiveState[] = Object.freeze(Object.values(ArchiveState));

/**
 * What happened to one planned member of a deletion (one append-only row each):
 * `DELETED` — revalidated and unlinked by this deletion; `KEPT` — it failed a check and stays,
 * with the reason; `MISSING` — it was not there when revalidated (for instance unlinked by a run
 * that died before recording it): gone, but this deletion cannot verify that it removed it.
 */
export const MemberOutcome = {
  DELETED: 'DELETED',
  KEPT: 'KEPT',
  MISSING: 'MISSING',
} as const;
export type MemberOutcome = (typeof MemberOutcome)[keyof typeof MemberOutcome];
export const MEMBER_OUTCOMES: readonly MemberOutcome[] = Object.freeze(
  Object.values(MemberOutcome),
);
