import { createHash } from 'node:crypto';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import type { Database } from '../persistence/openDatabase.ts';
import { selectStatusCounts } from '../persistence/reads/selectStatusCounts.ts';

/**
 * What the invariants are checked on: rows of the database and what stands on storage, read
 * after the run. Plain data, so that a test can plant a violation in it.
 */
export interface ChaosFacts {
  readonly operations: readonly {
    id: string;
    kind: string;
    status: string;
    attempt: number;
    maxRetries: number;
    lastError: string | null;
  }[];
  /** Every operation transition, in id order. */
  readonly transitions: readonly {
    id: number;
    operationId: string;
    from: string | null;
    to: string;
    event: string;
    attempt: number;
    by: string;
    reason: string | null;
    at: Date;
  }[];
  readonly steps: readonly {
    operationId: string;
    generation: number;
    name: string;
    attempt: number;
  }[];
  readonly copies: readonly {
    id: string;
    artifactType: string;
    artifactId: string;
    locationId: string;
    locationType: string;
    status: string;
    /** Why a deletion failed or what it kept, when it did. */
    lastError?: string | null;
    checksum: string | null;
    path: string | null;
    /** Whether something stands at `path` now (null without a path). */
    onStorage: boolean | null;
    /** The newest modification at `path` (the file, or a folder and its entries), if any. */
    modifiedAt: Date | null;
    /** The latest COMPLETE of an operation that output this copy, if any. */
    completedAt: Date | null;
  }[];
  /** The archive record, in id order (worker rows carry the attempt; operator rows null). */
  readonly archiveRecords: readonly {
    id: number;
    operationId: string;
    attempt: number | null;
    generation: number;
    state: string;
    archiveKey: string | null;
    objectVersion: string | null;
    objectSha256: string | null;
    contentSha256: string | null;
  }[];
  /** Each archive object an UPLOADED row names, as it stands now. */
  readonly archiveObjects: readonly {
    operationId: string;
    archiveKey: string;
    path: string;
    /** `<device>:<inode>:<mtime ns>` now, null when nothing is there. */
    version: string | null;
    sha256: string | null;
  }[];
  /** Receipts of deletions, by the copy deleted. */
  readonly receipts: readonly {
    copyId: string;
    archiveOperationId: string;
    archiveDigest: string;
  }[];
  /** Members a deletion recorded as removed, and whether a file stands at that path again. */
  readonly deletedMembers: readonly { copyId: string; path: string; onStorage: boolean }[];
  /** The counts per kind × status the runtime reports (`selectStatusCounts`), those above 0. */
  readonly counts: readonly { kind: string; status: string; n: number }[];
}

/** The newest mtime of a file, or of a folder and the entries in it. */
async function modifiedAt(path: string): Promise<Date | null> {
  try {
    const st = await lstat(path, { bigint: true });
    let newest = st.mtimeNs;
    if (st.isDirectory()) {
      for (const name of await readdir(path)) {
        const e = await lstat(join(path, name), { bigint: true });
        if (e.mtimeNs > newest) newest = e.mtimeNs;
      }
    }
    return new Date(Number(newest / 1_000_000n));
  } catch {
    return null;
  }
}

const exists = (path: string) =>
  lstat(path).then(
    () => true,
    () => false,
  );

async function objectNow(path: string): Promise<{ version: string | null; sha256: string | null }> {
  try {
    const st = await lstat(path, { bigint: true });
    const bytes = await readFile(path);
    return {
      version: `${st.dev}:${st.ino}:${st.mtimeNs}`,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    };
  } catch {
    return { version: null, sha256: null };
  }
}

/** Reads the facts of a finished run from its database and its storage. */
export async function collectFacts(database: Database): Promise<ChaosFacts> {
  const q = <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
    database.execute<T>(query);
  const operations = await q<ChaosFacts['operations'][number]>(sql`
    select id::text as id, kind, status, attempt, max_retries as "maxRetries",
           last_error->>'message' as "lastError"
    from operation order by created_at`);
  const transitions = (
    await q<ChaosFacts['transitions'][number]>(sql`
    select id::int as id, operation_id::text as "operationId", from_status as "from",
           to_status as "to", event, attempt, by, reason, at
    from operation_transition order by id`)
  ).map((t) => ({ ...t, at: new Date(t.at) }));
  const steps = await q<ChaosFacts['steps'][number]>(sql`
    select operation_id::text as "operationId", generation, name, attempt from operation_step`);
  const copyRows = await q<
    Omit<ChaosFacts['copies'][number], 'onStorage' | 'modifiedAt'> & { completedAt: string | null }
  >(sql`
    select c.id::text as id, c.artifact_type as "artifactType", c.artifact_id::text as "artifactId",
           c.location_id::text as "locationId", l.location_type as "locationType", c.status,
           c.checksum, c.path, c.last_error as "lastError",
           (select max(t.at) from operation_output o join operation_transition t
              on t.operation_id = o.operation_id and t.event = 'COMPLETE'
            where o.physical_copy_id = c.id) as "completedAt"
    from physical_copy c join data_location l on l.id = c.location_id`);
  const copies = await Promise.all(
    copyRows.map(async (c) => ({
      ...c,
      completedAt: c.completedAt === null ? null : new Date(c.completedAt),
      onStorage: c.path === null ? null : await exists(c.path),
      modifiedAt: c.path === null || c.status !== 'PRESENT' ? null : await modifiedAt(c.path),
    })),
  );
  const archiveRecords = await q<ChaosFacts['archiveRecords'][number]>(sql`
    select id::int as id, operation_id::text as "operationId", attempt, generation, state,
           archive_key as "archiveKey", object_version as "objectVersion",
           object_sha256 as "objectSha256", content_sha256 as "contentSha256"
    from archive_record order by id`);
  const uploaded = await q<{ operationId: string; archiveKey: string; root: string }>(sql`
    select distinct r.operation_id::text as "operationId", r.archive_key as "archiveKey",
           l.storage_root as root
    from archive_record r
    join long_term_archive_operation a on a.operation_id = r.operation_id
    join data_location l on l.id = a.destination_location_id
    where r.state = 'UPLOADED' and r.archive_key is not null`);
  const archiveObjects = await Promise.all(
    uploaded.map(async (u) => {
      const path = join(u.root, u.archiveKey);
      return {
        operationId: u.operationId,
        archiveKey: u.archiveKey,
        path,
        ...(await objectNow(path)),
      };
    }),
  );
  const receipts = await q<ChaosFacts['receipts'][number]>(sql`
    select physical_copy_id::text as "copyId", archive_operation_id::text as "archiveOperationId",
           archive_digest as "archiveDigest"
    from copy_deletion_receipt`);
  const removed = await q<{ copyId: string; path: string }>(sql`
    select d.physical_copy_id::text as "copyId", m.path
    from copy_deletion d
    join copy_deletion_member m on m.deletion_id = d.id
    join copy_deletion_outcome o on o.deletion_id = d.id and o.seq = m.seq
    where o.outcome = 'DELETED'`);
  const deletedMembers = await Promise.all(
    removed.map(async (m) => ({ ...m, onStorage: await exists(m.path) })),
  );
  return {
    operations,
    transitions,
    steps,
    copies,
    archiveRecords,
    archiveObjects,
    receipts,
    deletedMembers,
    counts: Object.entries(await selectStatusCounts(database)).flatMap(([kind, byStatus]) =>
      Object.entries(byStatus)
        .filter(([, n]) => n > 0)
        .map(([status, n]) => ({ kind, status, n })),
    ),
  };
}
