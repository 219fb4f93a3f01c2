import type { AnyStateMachine } from 'xstate';

function guardLabel(guard: unknown): string | null {
  if (guard === undefined || guard === null) return null;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && 'type' in guard && typeof guard.type === 'string') {
    return guard.type;
  }
  if (typeof guard === 'function') {
    const parts = (guard as { guards?: unknown[] }).guards;
    if (Array.isArray(parts)) {
      const names = parts.map(guardLabel).filter((n): n is string => n !== null);
      return names.join(' and ');
    }
    return guard.name || 'guard';
  }
  return 'guard';
}

/**
 * Renders a machine's top-level states and transitions as a Mermaid `stateDiagram-v2`, read from
 * the definition itself so the picture can never drift from the code. A guarded transition shows
 * its guard in brackets; the fallback of a guarded list shows `else`.
 *
 * @example
 * ```ts
 * console.log(toMermaid(operationMachine));
 * // stateDiagram-v2
 * //   [*] --> PENDING
 * //   PENDING --> SCHEDULED : SCHEDULE
 * ```
 */
export function toMermaid(machine: AnyStateMachine): string {
  const lines = ['stateDiagram-v2'];
  const root = machine.root;
  const initial = root.initial?.target?.[0]?.key;
  if (initial !== undefined) lines.push(`  [*] --> ${initial}`);
  for (const [key, node] of Object.entries(root.states)) {
    for (const [eventType, definitions] of node.transitions) {
      definitions.forEach((t, i) => {
        const guard = guardLabel(t.guard);
        const guardedBefore = definitions.slice(0, i).some((d) => d.guard !== undefined);
        const label = [guard, guardedBefore ? 'else' : null].filter((p) => p !== null).join(', ');
        for (const target of t.target ?? [node]) {
          lines.push(`  ${key} --> ${target.key} : ${eventType}${label ? ` [${label}]` : ''}`);
        }
      });
    }
    if (node.type === 'final') lines.push(`  ${key} --> [*]`);
  }
  return lines.join('\n');
}
