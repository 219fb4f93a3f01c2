import type { OperationKind } from '../machines/OperationKind.ts';
import { isRecoveryPath, RECOVERY_PATHS, type RecoveryPath } from '../machines/recoveryPaths.ts';
import type { RuntimeTiming } from '../runtime/RuntimeTiming.ts';
import type { ChaosFacts } from './facts.ts';
import type { FaultRecord } from './faults.ts';

/** One figure of a chaos run, printed as one JSON line. */
export interface ChaosFigure {
  readonly figure: string;
  readonly value: number;
  readonly unit: string;
  /** The timer a latency is compared with, and `value / timer`. */
  readonly timer?: number;
  readonly ratio?: number;
  readonly note?: string;
}

/** One reset by a recovery path, and how long after its cause it came. */
export interface Recovery {
  readonly path: RecoveryPath;
  readonly operationId: string;
  /** The operation's kind (a deadline is the kind's). */
  readonly kind: string;
  readonly latencyMs: number;
  /** The fault the latency is counted from, or `entered` (the status it was reset from). */
  readonly since: string;
}

/**
 * Each reset by a recovery path, with its latency: from the later of the moment the operation
 * entered the status it was reset from and the start of the last fault before the reset, to the
 * reset (for the reconciler and the deadline, whose timers count from the status entered, always
 * from that moment).
 */
export function recoveries(facts: ChaosFacts, faults: readonly FaultRecord[]): Recovery[] {
  const out: Recovery[] = [];
  const kinds = new Map(facts.operations.map((o) => [o.id, o.kind]));
  const byOp = new Map<string, ChaosFacts['transitions'][number][]>();
  for (const t of facts.transitions) {
    const list = byOp.get(t.operationId) ?? [];
    list.push(t);
    byOp.set(t.operationId, list);
  }
  for (const rows of byOp.values()) {
    rows.forEach((t, i) => {
      const path = t.by;
      if (t.event !== 'RESET' || !isRecoveryPath(path)) return;
      const entered = rows[i - 1]?.at ?? t.at;
      // The reconciler's floor and a deadline count from the status entered, whatever happened since.
      const fault =
        path === 'reconciler' || path === 'deadline'
          ? undefined
          : [...faults].reverse().find((f) => f.at <= t.at && f.at > entered);
      const from = fault?.at ?? entered;
      out.push({
        path,
        operationId: t.operationId,
        kind: kinds.get(t.operationId) ?? '',
        latencyMs: t.at.getTime() - from.getTime(),
        since: fault?.kind ?? 'entered',
      });
    });
  }
  return out;
}

/** The timer a recovery is measured against: its path's, for a deadline its kind's. */
const timerOf = (r: Recovery, timing: RuntimeTiming): number => {
  switch (r.path) {
    case 'heartbeat_monitor':
      return timing.heartbeatTimeoutMs;
    case 'deadline':
      return timing.deadlines[r.kind as OperationKind] ?? timing.reconcilerFloorMs;
    case 'reconciler':
      return timing.reconcilerFloorMs;
    case 'broker':
      return timing.ackWaitMs;
  }
};

/** The run's figures: counts, recovery latency per path against its timer, submit → SCHEDULED. */
export function chaosFigures(
  facts: ChaosFacts,
  faults: readonly FaultRecord[],
  timing: RuntimeTiming,
): ChaosFigure[] {
  const figures: ChaosFigure[] = [];
  const count = (figure: string, value: number, unit = 'count', note?: string) =>
    figures.push({ figure, value, unit, ...(note === undefined ? {} : { note }) });
  count('operations', facts.operations.length);
  count('completed', facts.operations.filter((o) => o.status === 'COMPLETED').length);
  count('failed', facts.operations.filter((o) => o.status === 'FAILED').length);
  for (const kind of new Set(faults.map((f) => f.kind))) {
    count(`faults_${kind}`, faults.filter((f) => f.kind === kind).length);
  }
  // The workload archives every raw data package it unpacks to the buffer.
  const buffer = facts.copies.filter(
    (c) => c.locationType === 'buffer' && c.artifactType === 'raw_data_package',
  );
  count('buffer_copies_deleted', buffer.filter((c) => c.status === 'DELETED').length);
  count(
    'buffer_copies_not_deleted',
    buffer.filter((c) => c.status !== 'DELETED').length,
    'count',
    'every buffer copy is archived by the workload: one left is a deletion that did not finish',
  );
  count(
    'copies_deletion_failed',
    facts.copies.filter((c) => c.status === 'DELETION_FAILED').length,
  );
  const all = recoveries(facts, faults);
  for (const path of RECOVERY_PATHS) {
    const mine = all.filter((r) => r.path === path);
    count(`resets_${path}`, mine.length);
    if (mine.length === 0) continue;
    const worst = mine.reduce((a, b) => (b.latencyMs > a.latencyMs ? b : a));
    const timer = timerOf(worst, timing);
    figures.push({
      figure: `recovery_${path}_max`,
      value: worst.latencyMs,
      unit: 'ms',
      timer,
      ratio: Math.round((worst.latencyMs / timer) * 100) / 100,
      note: `${worst.operationId}, counted from ${worst.since}`,
    });
  }
  const created = new Map<string, Date>();
  let longest = { ms: 0, id: '' };
  for (const t of facts.transitions) {
    if (t.from === null) created.set(t.operationId, t.at);
    if (t.event === 'SCHEDULE' && created.has(t.operationId)) {
      const ms = t.at.getTime() - (created.get(t.operationId) as Date).getTime();
      if (ms > longest.ms) longest = { ms, id: t.operationId };
      created.delete(t.operationId);
    }
  }
  figures.push({
    figure: 'submit_to_scheduled_max',
    value: longest.ms,
    unit: 'ms',
    ...(longest.id === '' ? {} : { note: longest.id }),
  });
  return figures;
}
