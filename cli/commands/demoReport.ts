import { ACTOR_WORDS, isNamedActor } from '../../machines/actors.ts';
import { OperationStatus } from '../../machines/operationMachine.ts';
import type { OperationInspection } from '../../persistence/inspectOperation.ts';
import type { TransitionEntry } from '../../persistence/JournalRepository.ts';

/** A transition history, one attempt a line: `PENDING → SCHEDULED → IN_PROGRESS (worker-A) → …`. */
export function describePath(transitions: readonly TransitionEntry[]): string[] {
  const lines: string[] = [];
  let parts: string[] = [];
  for (const t of transitions) {
    let label: string = t.to;
    if (t.event === 'RESET' || t.event === 'RETRY') {
      label += ` (${t.event} by ${t.by}: ${t.reason ?? 'no reason given'})`;
    } else if (t.event === 'FAIL') label += ` (FAIL: ${t.reason ?? 'no reason given'})`;
    else if (t.to === OperationStatus.IN_PROGRESS) label += ` (${t.by})`;
    parts.push(label);
    if (t.to === OperationStatus.PENDING && t.from !== null) {
      lines.push(parts.join(' → '));
      parts = [];
    }
  }
  if (parts.length > 0) lines.push(parts.join(' → '));
  return lines.map((l, i) => (i === 0 ? l : `→ ${l}`));
}

/** Which recovery path(s) brought an operation home, from its history. */
export function recoveryOf(transitions: readonly TransitionEntry[]): string {
  const paths = transitions.flatMap((t) => {
    if (t.event === 'RESET') return [isNamedActor(t.by) ? ACTOR_WORDS[t.by] : t.by];
    if (t.event === 'RETRY') return [`retried by ${t.by} after it failed for good`];
    if (t.event === 'FAIL' && t.to === OperationStatus.PENDING) return ['retry after a failure'];
    return [];
  });
  return paths.length === 0 ? 'none needed' : paths.join(', then ');
}

/** The journal steps of an operation, one line, with a note on an object found already written. */
export function stepsOf(view: OperationInspection): string {
  return view.steps
    .map((s) => {
      const outcome = (s.result as { outcome?: unknown } | null)?.outcome;
      const note =
        outcome === 'identical'
          ? ' (the object was already there from an earlier attempt with the same sha256: kept, not rewritten)'
          : '';
      return `${s.name} #${s.attempt}${note}`;
    })
    .join(' · ');
}
