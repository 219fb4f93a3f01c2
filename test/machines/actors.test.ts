import { readFileSync } from 'node:fs';
import type { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { recoveryOf } from '../../cli/commands/demoReport.ts';
import {
  ACTOR_WORDS,
  isNamedActor,
  NAMED_ACTORS,
  OPERATOR,
  SYSTEM_ACTORS,
  WORKER,
} from '../../machines/actors.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { RESET_BY } from '../../machines/operationMachine.ts';
import { isSystemActor, SUBMITTER_ALLOWED, submitterProblem } from '../../machines/submitter.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { createMetrics } from '../../runtime/Metrics.ts';

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

/** The transitions counter's `by` label for one transition by `by`. */
async function byLabel(by: string, event: 'SCHEDULE' | 'RESET' | 'RETRY' = 'SCHEDULE') {
  const metrics = createMetrics(memoryLogger(), { defaultMetrics: false });
  metrics.observer.transitions([
    {
      operationId: 'op-1',
      kind: OperationKind.TRANSFER,
      from: 'PENDING',
      to: 'SCHEDULED',
      event,
      by,
      attempt: 1,
      at: Date.parse('2026-12-01T12:00:00Z'),
    },
  ]);
  const text = await (metrics.registry as Registry).metrics();
  return /opstate_transitions_total\{kind="transfer",event="\w+",by="([^"]+)"\} 1/.exec(text)?.[1];
}

/**
 * The actors the history names are one list; everything that names them takes it from there.
 * Each place is asked about every actor, so an actor missing anywhere fails here.
 */
describe('the named actors, everywhere they are named', () => {
  it("are opstate's own (the scheduler and the recovery paths) and the operator", () => {
    expect(NAMED_ACTORS).toEqual([...SYSTEM_ACTORS, OPERATOR]);
    expect(OPERATOR).toBe('operator');
    // Every RESET is by a named actor: a recovery path or the operator.
    expect(RESET_BY.filter((by) => !isNamedActor(by))).toEqual([]);
    expect(isNamedActor(WORKER)).toBe(false);
    expect(isNamedActor('worker-A')).toBe(false);
  });

  it('anyone else is one label in the metrics, so a worker id never makes a series of its own', async () => {
    expect(await byLabel('worker-A')).toBe(WORKER);
    expect(await byLabel('ingest')).toBe(WORKER);
  });

  it.each(NAMED_ACTORS)(
    '%s: the submitter check, the metrics, the report words and the docs know it',
    async (actor) => {
      const system = (SYSTEM_ACTORS as readonly string[]).includes(actor);
      expect(isNamedActor(actor)).toBe(true);
      expect(isSystemActor(actor)).toBe(system);
      // A submitter may not take opstate's own names; the operator is a submitter like any other.
      expect(submitterProblem(actor)).toBe(
        system
          ? `'${actor}' is one of opstate's own actors; name the service or person that submits`
          : undefined,
      );
      expect(SUBMITTER_ALLOWED.includes(actor)).toBe(system);
      expect(await byLabel(actor)).toBe(actor);
      expect(ACTOR_WORDS[actor]).toMatch(/^[a-z ]+$/);
      if ((RESET_BY as readonly string[]).includes(actor)) {
        const reset = { from: 'IN_PROGRESS', to: 'PENDING', event: 'RESET', attempt: 1 } as const;
        const at = new Date('2026-12-01T12:00:00Z');
        expect(recoveryOf([{ ...reset, by: actor, reason: 'r', at }])).toBe(ACTOR_WORDS[actor]);
      }
      // The metrics reference names every value the `by` label takes.
      const labels =
        /`by` is one of\s([\s\S]+?) for anyone else/.exec(read('docs/observability.md'))?.[1] ?? '';
      expect(labels).toContain(`\`${actor}\``);
      expect(labels).toContain(`\`${WORKER}\``);
    },
  );
});
