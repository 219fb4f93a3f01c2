import type { OperationKind } from '../machines/OperationKind.ts';
import type { OperationStatus } from '../machines/operationMachine.ts';
import { replayTransitions } from '../machines/replayTransitions.ts';
import type { ChaosFacts } from './facts.ts';

/** One invariant checked over the facts: how many things it looked at, and what broke it. */
export interface InvariantResult {
  readonly name: string;
  readonly checked: number;
  readonly violations: readonly string[];
}

type Check = (f: ChaosFacts) => Omit<InvariantResult, 'name'>;

const groupBy = <T>(items: readonly T[], key: (t: T) => string) => {
  const map = new Map<string, T[]>();
  for (const t of items) {
    const k = key(t);
    const list = map.get(k);
    if (list === undefined) map.set(k, [t]);
    else list.push(t);
  }
  return map;
};
const bare = (digest: string | null | undefined) => (digest ?? '').replace(/^sha256:/, '');

/** Every operation is COMPLETED, or FAILED with a reason. */
const everyOperationTerminal: Check = (f) => ({
  checked: f.operations.length,
  violations: f.operations
    .filter(
      (o) => !(o.status === 'COMPLETED' || (o.status === 'FAILED' && (o.lastError ?? '') !== '')),
    )
    .map(
      (o) =>
        `${o.kind} ${o.id} ended ${o.status}${o.status === 'FAILED' ? ' without a reason' : ''}`,
    ),
});

/** At most one live (not DELETED) copy of an artifact at a location. */
const oneLiveCopy: Check = (f) => {
  const live = f.copies.filter((c) => c.status !== 'DELETED');
  const groups = groupBy(live, (c) => `${c.artifactType} ${c.artifactId} @ ${c.locationId}`);
  return {
    checked: groups.size,
    violations: [...groups]
      .filter(([, cs]) => cs.length > 1)
      .map(([k, cs]) => `${cs.length} live copies of ${k}: ${cs.map((c) => c.id).join(', ')}`),
  };
};

/** Every archive object is the one first recorded at its key: never replaced, never rewritten. */
const archiveNeverReplaced: Check = (f) => {
  const violations: string[] = [];
  const uploads = f.archiveRecords.filter((r) => r.state === 'UPLOADED' && r.archiveKey !== null);
  const byKey = groupBy(uploads, (r) => String(r.archiveKey));
  for (const [key, rows] of byKey) {
    const first = rows[0];
    for (const r of rows.slice(1)) {
      if (r.objectVersion !== first?.objectVersion || r.objectSha256 !== first?.objectSha256) {
        violations.push(
          `archive ${key}: record ${r.id} names object ${r.objectVersion} (${r.objectSha256}), record ${first?.id} named ${first?.objectVersion} (${first?.objectSha256})`,
        );
      }
    }
  }
  for (const o of f.archiveObjects) {
    const first = byKey.get(o.archiveKey)?.[0];
    if (first === undefined) continue;
    if (o.version !== first.objectVersion || o.sha256 !== bare(first.objectSha256)) {
      violations.push(
        `archive object ${o.path} is ${o.version ?? 'gone'} (${o.sha256 ?? '-'}), recorded ${first.objectVersion} (${first.objectSha256})`,
      );
    }
  }
  return { checked: byKey.size + f.archiveObjects.length, violations };
};

/** The last verification of each archive operation (VERIFIED or VERIFY_FAILED). */
function lastVerifications(f: ChaosFacts) {
  const last = new Map<string, ChaosFacts['archiveRecords'][number]>();
  for (const r of f.archiveRecords)
    if (r.state === 'VERIFIED' || r.state === 'VERIFY_FAILED') last.set(r.operationId, r);
  return last;
}

/**
 * Every DELETED copy has a receipt and, at a long-term archive, a PRESENT copy of the same
 * artifact with the same digest whose operation COMPLETED with a last verification VERIFIED of the
 * receipt's digest; and no member a deletion removed stands on storage again.
 */
const noDeletionWithoutVerifiedArchive: Check = (f) => {
  const violations: string[] = [];
  const receipts = groupBy(f.receipts, (r) => r.copyId);
  const verified = lastVerifications(f);
  const status = new Map(f.operations.map((o) => [o.id, o.status]));
  const deleted = f.copies.filter((c) => c.status === 'DELETED');
  for (const c of deleted) {
    const own = receipts.get(c.id) ?? [];
    if (own.length === 0) violations.push(`copy ${c.id} is DELETED without a receipt`);
    const archives = f.copies.filter(
      (a) =>
        a.locationType === 'long_term_archive' &&
        a.artifactType === c.artifactType &&
        a.artifactId === c.artifactId &&
        a.status === 'PRESENT' &&
        a.checksum === c.checksum,
    );
    if (archives.length === 0) {
      violations.push(
        `copy ${c.id} is DELETED with no PRESENT archive copy of digest ${c.checksum}`,
      );
    }
    for (const r of own) {
      const v = verified.get(r.archiveOperationId);
      if (status.get(r.archiveOperationId) !== 'COMPLETED' || v?.state !== 'VERIFIED') {
        violations.push(
          `copy ${c.id}: its receipt's archive ${r.archiveOperationId} is ${status.get(r.archiveOperationId)}, last verification ${v?.state ?? 'none'}`,
        );
      } else if (bare(v.contentSha256) !== bare(r.archiveDigest)) {
        violations.push(
          `copy ${c.id}: receipt digest ${r.archiveDigest}, archive verified ${v.contentSha256}`,
        );
      }
    }
  }
  for (const m of f.deletedMembers) {
    if (m.onStorage) violations.push(`${m.path} of DELETED copy ${m.copyId} is on storage again`);
  }
  return { checked: deleted.length + f.deletedMembers.length, violations };
};

/** Every PRESENT copy with a path has something at that path. */
const presentCopiesOnStorage: Check = (f) => {
  const present = f.copies.filter((c) => c.status === 'PRESENT' && c.path !== null);
  return {
    checked: present.length,
    violations: present
      .filter((c) => c.onStorage === false)
      .map((c) => `PRESENT copy ${c.id} has nothing at ${c.path}`),
  };
};

/**
 * Every operation's history is a path of the lifecycle machine: each row starts where the last
 * ended, the machine takes each event to the stored status (a worker event of a superseded
 * attempt would not), the last row is the stored status, and there is at most one COMPLETE.
 */
const transitionPathsValid: Check = (f) => {
  const violations: string[] = [];
  const history = groupBy(f.transitions, (t) => t.operationId);
  for (const o of f.operations) {
    const rows = history.get(o.id) ?? [];
    const steps = replayTransitions(
      { kind: o.kind as OperationKind, maxRetries: o.maxRetries },
      rows.map((t) => ({
        ...t,
        from: t.from as OperationStatus | null,
        to: t.to as OperationStatus,
      })),
    );
    let at: string | null = null;
    for (const s of steps) {
      const t = s.transition;
      if (t.from !== at)
        violations.push(`${o.id}: row ${t.id} ${t.event} starts at ${t.from}, not ${at}`);
      if (s.diverged) {
        violations.push(
          `${o.id}: row ${t.id} ${t.from} → ${t.to} by ${t.by} (${t.event}@${t.attempt}) is no transition of the machine`,
        );
      }
      at = t.to;
    }
    if (at !== o.status) violations.push(`${o.id}: history ends at ${at}, stored ${o.status}`);
    const completes = rows.filter((t) => t.event === 'COMPLETE').length;
    if (completes > 1 || (o.status === 'COMPLETED' && completes !== 1)) {
      violations.push(`${o.id}: ${completes} COMPLETE transitions`);
    }
  }
  return { checked: f.operations.length, violations };
};

const STEP_STATES: Record<string, readonly string[]> = {
  plan: ['PLANNED'],
  upload: ['UPLOADED', 'CONFLICT'],
  verify: ['READ_BACK', 'VERIFIED', 'VERIFY_FAILED'],
};

/**
 * No stale write: every journal step and worker-written archive row comes from an attempt that
 * was STARTed, no archive step ran again (rows of a later attempt) once it was journaled, and no
 * copy an operation produced was modified on storage after that operation completed (a worker
 * presumed dead that woke and went on writing).
 */
const noStaleWrite: Check = (f) => {
  const violations: string[] = [];
  const started = new Set(
    f.transitions.filter((t) => t.event === 'START').map((t) => `${t.operationId}@${t.attempt}`),
  );
  for (const s of f.steps) {
    if (!started.has(`${s.operationId}@${s.attempt}`)) {
      violations.push(
        `${s.operationId}: step ${s.name} recorded by attempt ${s.attempt}, which never started`,
      );
    }
  }
  const workerRows = f.archiveRecords.filter(
    (r) => r.attempt !== null && Object.values(STEP_STATES).some((s) => s.includes(r.state)),
  );
  for (const r of workerRows) {
    if (!started.has(`${r.operationId}@${r.attempt}`)) {
      violations.push(
        `${r.operationId}: archive ${r.state} by attempt ${r.attempt}, which never started`,
      );
    }
  }
  for (const s of f.steps) {
    const states = STEP_STATES[s.name];
    if (states === undefined) continue;
    const rerun = workerRows.filter(
      (r) =>
        r.operationId === s.operationId &&
        r.generation === s.generation &&
        states.includes(r.state) &&
        (r.attempt ?? 0) > s.attempt,
    );
    for (const r of rerun) {
      violations.push(
        `${s.operationId}: step ${s.name} journaled by attempt ${s.attempt} ran again (archive ${r.state} by attempt ${r.attempt})`,
      );
    }
  }
  // On storage: nothing an operation produced was written after it completed.
  const produced = f.copies.filter((c) => c.modifiedAt !== null && c.completedAt !== null);
  for (const c of produced) {
    if ((c.modifiedAt as Date).getTime() > (c.completedAt as Date).getTime()) {
      violations.push(
        `${c.path} (copy ${c.id}) was written at ${c.modifiedAt?.toISOString()}, after its operation completed at ${c.completedAt?.toISOString()}`,
      );
    }
  }
  return { checked: f.steps.length + workerRows.length + produced.length, violations };
};

/**
 * The counts the runtime reports (summed from the tally the database keeps beside every write)
 * are the operations as stored: a kill or a restart mid-write never leaves them off by one.
 */
const countsAsStored: Check = (f) => {
  const stored = new Map<string, number>();
  for (const o of f.operations) {
    const key = `${o.kind} ${o.status}`;
    stored.set(key, (stored.get(key) ?? 0) + 1);
  }
  const reported = new Map(f.counts.map((c) => [`${c.kind} ${c.status}`, c.n]));
  const violations = [...new Set([...stored.keys(), ...reported.keys()])]
    .filter((key) => (stored.get(key) ?? 0) !== (reported.get(key) ?? 0))
    .map((key) => `${key}: counted ${reported.get(key) ?? 0}, stored ${stored.get(key) ?? 0}`);
  return { checked: f.operations.length, violations };
};

export const INVARIANTS: ReadonlyArray<readonly [string, Check]> = [
  ['every operation terminal', everyOperationTerminal],
  ['one live copy of an artifact at a location', oneLiveCopy],
  ['no archive replaced', archiveNeverReplaced],
  ['no deletion without a verified archive', noDeletionWithoutVerifiedArchive],
  ['PRESENT copies on storage', presentCopiesOnStorage],
  ['transition paths valid', transitionPathsValid],
  ['no stale write', noStaleWrite],
  ['counts as stored', countsAsStored],
];

/** Runs every invariant over the facts. */
export function checkInvariants(facts: ChaosFacts): InvariantResult[] {
  return INVARIANTS.map(([name, check]) => ({ name, ...check(facts) }));
}
