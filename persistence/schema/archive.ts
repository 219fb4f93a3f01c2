import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { ARCHIVE_STATES, MEMBER_OUTCOMES } from '../../machines/ArchiveState.ts';
import { oneOf } from './checks.ts';
import { operation } from './operation.ts';
import { physicalCopy } from './physicalCopy.ts';

/**
 * The archive record: the append-only resume record of one archive-then-delete batch (a trigger
 * refuses UPDATE). Each row is one transition (`ArchiveState`) naming the run (operation, attempt,
 * plan generation), the archive identity (key, object version, whole-object digest), the content
 * digest of the package, and, at `PLANNED`, the source manifest. Deletion-side rows name their
 * deletion. Never holds a key or a credential: `key_id` is a fingerprint that cannot be reversed.
 * An attempt appends each archive-side state once (`archive_record_attempt_state_key`), so an
 * append retried after an outage took its reply finds its row instead of adding a second.
 */
export const archiveRecord = pgTable(
  'archive_record',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    operationId: uuid('operation_id')
      .notNull()
      .references(() => operation.id, { onDelete: 'cascade' }),
    /** The operation attempt that wrote an archive-side row; null on deletion-side rows. */
    attempt: integer('attempt'),
    generation: integer('generation').notNull().default(1),
    state: text('state').notNull(),
    by: text('by').notNull(),
    archiveKey: text('archive_key'),
    objectVersion: text('object_version'),
    /** sha256 (hex) of the stored bytes (the ciphertext when encrypted). */
    objectSha256: text('object_sha256'),
    /** sha256 (hex) of the package itself (the plaintext). */
    contentSha256: text('content_sha256'),
    size: bigint('size', { mode: 'number' }),
    encrypted: boolean('encrypted'),
    keyId: text('key_id'),
    manifest: jsonb('manifest'),
    deletionId: uuid('deletion_id'),
    detail: jsonb('detail'),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('archive_record_operation_idx').on(t.operationId, t.id),
    uniqueIndex('archive_record_attempt_state_key')
      .on(t.operationId, t.attempt, t.state)
      .where(sql`attempt is not null`),
    check('archive_record_state_check', oneOf(t.state, ARCHIVE_STATES)),
  ],
);

/**
 * The deletion policy the deleters read at run time (a row per name; `default` is the one used):
 * which location types are cleaned after a verified archive, the grace period after the archive
 * completed, the protected path prefixes that are never deleted (re-read before every unlink), and
 * how many interruptions a deletion may take before an operator must look.
 */
export const deletionPolicy = pgTable(
  'deletion_policy',
  {
    name: text('name').primaryKey(),
    cleanLocationTypes: text('clean_location_types').array().notNull(),
    graceSeconds: integer('grace_seconds').notNull(),
    protectedPrefixes: text('protected_prefixes').array().notNull(),
    maxFailures: integer('max_failures').notNull(),
    updatedBy: text('updated_by').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check('deletion_policy_grace_check', sql`${t.graceSeconds} >= 0`),
    check('deletion_policy_max_failures_check', sql`${t.maxFailures} >= 1`),
  ],
);

/**
 * The deleters' work list: copies consumed by a long-term archive that has been VERIFIED at least
 * once and that are not DELETED yet, with the type of the location they are at. A trigger on
 * `archive_record` enlists an archive's input copies when a VERIFIED row is appended, and a trigger
 * on `physical_copy` strikes a copy off when it becomes DELETED (which it never leaves), so the
 * list holds what may still be cleaned, not the archive history. It only narrows where the
 * deleters look: whether a listed copy may be scheduled is decided as before (PRESENT, archive
 * COMPLETED past the grace period, last verification VERIFIED, no claim; the copy machine's guard
 * has the last word).
 */
export const deletionCandidate = pgTable(
  'deletion_candidate',
  {
    physicalCopyId: uuid('physical_copy_id')
      .notNull()
      .references(() => physicalCopy.id, { onDelete: 'cascade' }),
    archiveOperationId: uuid('archive_operation_id')
      .notNull()
      .references(() => operation.id, { onDelete: 'cascade' }),
    /** The type of the copy's location: a pass can pick the types its policy cleans by index. */
    locationType: text('location_type').notNull(),
  },
  (t) => [
    primaryKey({
      name: 'deletion_candidate_pkey',
      columns: [t.physicalCopyId, t.archiveOperationId],
    }),
    index('deletion_candidate_location_type_idx').on(t.locationType),
  ],
);

/**
 * One deletion plan of a copy, written before any unlink with the `START_DELETION` that starts it.
 * It names the verified archive it relies on (operation, archive copy, digest, object digest), the
 * identity of the storage root it was planned on, and the lease of the deleter running it: `epoch`
 * grows at every takeover and fences every later write of an older holder.
 */
export const copyDeletion = pgTable(
  'copy_deletion',
  {
    id: uuid('id').primaryKey().default(sql`opstate_uuid_v7()`),
    physicalCopyId: uuid('physical_copy_id')
      .notNull()
      .references(() => physicalCopy.id, { onDelete: 'cascade' }),
    plan: integer('plan').notNull(),
    archiveOperationId: uuid('archive_operation_id')
      .notNull()
      .references(() => operation.id),
    archiveCopyId: uuid('archive_copy_id')
      .notNull()
      .references(() => physicalCopy.id),
    archiveDigest: text('archive_digest').notNull(),
    archiveObjectSha256: text('archive_object_sha256').notNull(),
    path: text('path').notNull(),
    folder: boolean('folder').notNull(),
    rootPath: text('root_path').notNull(),
    rootDevice: text('root_device').notNull(),
    rootInode: text('root_inode').notNull(),
    holder: text('holder').notNull(),
    epoch: integer('epoch').notNull().default(1),
    leaseUntil: timestamp('lease_until', { withTimezone: true }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique('copy_deletion_copy_plan_key').on(t.physicalCopyId, t.plan),
    index('copy_deletion_archive_operation_idx').on(t.archiveOperationId),
  ],
);

/**
 * The members of a deletion plan (append-only): every file's path, device, inode, size, mtime (ns)
 * and the sha256 the archived package's manifest gives it. Revalidation compares against these.
 */
export const copyDeletionMember = pgTable(
  'copy_deletion_member',
  {
    deletionId: uuid('deletion_id')
      .notNull()
      .references(() => copyDeletion.id, { onDelete: 'cascade' }),
    seq: integer('seq').notNull(),
    name: text('name').notNull(),
    path: text('path').notNull(),
    device: text('device').notNull(),
    inode: text('inode').notNull(),
    size: bigint('size', { mode: 'number' }).notNull(),
    mtimeNs: text('mtime_ns').notNull(),
    sha256: text('sha256').notNull(),
  },
  (t) => [primaryKey({ name: 'copy_deletion_member_pkey', columns: [t.deletionId, t.seq] })],
);

/**
 * What happened to each planned member (append-only, at most one row per member): DELETED, KEPT
 * with the reason, or MISSING. Written under the lease epoch that did it.
 */
export const copyDeletionOutcome = pgTable(
  'copy_deletion_outcome',
  {
    deletionId: uuid('deletion_id')
      .notNull()
      .references(() => copyDeletion.id, { onDelete: 'cascade' }),
    seq: integer('seq').notNull(),
    outcome: text('outcome').notNull(),
    reason: text('reason'),
    epoch: integer('epoch').notNull(),
    by: text('by').notNull(),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'copy_deletion_outcome_pkey', columns: [t.deletionId, t.seq] }),
    check('copy_deletion_outcome_check', oneOf(t.outcome, MEMBER_OUTCOMES)),
  ],
);

/**
 * The durable receipt of a finished deletion (append-only, one per deletion): the members removed
 * (and found missing) over every plan of the copy, their bytes, the archive it relied on (key,
 * object version, digests) and the time. Only after it is written may the copy become DELETED.
 */
export const copyDeletionReceipt = pgTable('copy_deletion_receipt', {
  deletionId: uuid('deletion_id')
    .primaryKey()
    .references(() => copyDeletion.id, { onDelete: 'cascade' }),
  physicalCopyId: uuid('physical_copy_id').notNull(),
  membersDeleted: integer('members_deleted').notNull(),
  membersMissing: integer('members_missing').notNull(),
  bytes: bigint('bytes', { mode: 'number' }).notNull(),
  archiveOperationId: uuid('archive_operation_id').notNull(),
  archiveKey: text('archive_key'),
  archiveObjectVersion: text('archive_object_version'),
  archiveObjectSha256: text('archive_object_sha256').notNull(),
  archiveDigest: text('archive_digest').notNull(),
  detail: jsonb('detail'),
  by: text('by').notNull(),
  at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
});
