import { describe, expect, it } from 'vitest';
import { keptByFacts } from '../../deleter/runDeletion.ts';

describe('keptByFacts: what the facts of a step say about every remaining member', () => {
  const ok = {
    archiveOk: true,
    archiveProblem: null as string | null,
    cleaned: true,
    locationType: 'buffer',
    retainedBy: [] as string[],
  };
  const rows: [string, typeof ok, string | undefined][] = [
    ['all clear: revalidate and unlink', ok, undefined],
    [
      'the archive no longer VERIFIED as planned: keep',
      { ...ok, archiveOk: false, archiveProblem: 'digest changed' },
      'the archive is no longer VERIFIED as planned: digest changed',
    ],
    [
      'the policy no longer cleans the location: keep',
      { ...ok, cleaned: false },
      'the deletion policy no longer cleans buffer locations',
    ],
    [
      'a retention claim holds the copy: keep',
      { ...ok, retainedBy: ['g-1', 'g-2'] },
      'a retention claim holds the copy (group g-1, g-2)',
    ],
    [
      'the archive comes first when several facts fail',
      { ...ok, archiveOk: false, archiveProblem: 'gone', cleaned: false, retainedBy: ['g'] },
      'the archive is no longer VERIFIED as planned: gone',
    ],
  ];
  it.each(rows)('%s', (_, facts, reason) => {
    const verdict = keptByFacts(facts);
    expect(verdict === undefined ? undefined : verdict.reason).toBe(reason);
    if (verdict !== undefined) expect(verdict.outcome).toBe('KEPT');
  });
});
