import { describe, expect, it } from 'vitest';
import type { ChaosFacts } from '../../chaos/facts.ts';
import { chaosFigures, recoveries } from '../../chaos/figures.ts';
import { checkInvariants } from '../../chaos/invariants.ts';
import { resolveRuntimeTiming } from '../../runtime/RuntimeTiming.ts';

const OP = '11111111-1111-4111-8111-111111111111';
const at = (s: number) => new Date(Date.UTC(2026, 10, 30, 12, 0, s));
const t = (
  id: number,
  from: string | null,
  to: string,
  event: string,
  by: string,
  attempt = 1,
) => ({
  id,
  operationId: OP,
  from,
  to,
  event,
  attempt,
  by,
  reason: null,
  at: at(id),
});

/** One long-term archive, reset once by the monitor, completed, its buffer copy deleted. */
function clean(): ChaosFacts {
  return {
    operations: [
      {
        id: OP,
        kind: 'long_term_archive',
        status: 'COMPLETED',
        attempt: 2,
        maxRetries: 3,
        lastError: null,
      },
    ],
    transitions: [
      t(1, null, 'PENDING', 'CREATE', 'operator'),
      t(2, 'PENDING', 'SCHEDULED', 'SCHEDULE', 'scheduler'),
      t(3, 'SCHEDULED', 'IN_PROGRESS', 'START', 'w-1'),
      t(8, 'IN_PROGRESS', 'PENDING', 'RESET', 'heartbeat_monitor'),
      t(9, 'PENDING', 'SCHEDULED', 'SCHEDULE', 'scheduler', 2),
      t(10, 'SCHEDULED', 'IN_PROGRESS', 'START', 'w-2', 2),
      t(11, 'IN_PROGRESS', 'COMPLETED', 'COMPLETE', 'w-2', 2),
    ],
    steps: [
      { operationId: OP, generation: 1, name: 'plan', attempt: 1 },
      { operationId: OP, generation: 1, name: 'upload', attempt: 2 },
      { operationId: OP, generation: 1, name: 'verify', attempt: 2 },
    ],
    copies: [
      {
        id: 'buf',
        artifactType: 'raw_data_package',
        artifactId: 'pkg',
        locationId: 'buffer',
        locationType: 'buffer',
        status: 'DELETED',
        checksum: 'sha256:aa',
        path: '/b/pkg',
        onStorage: false,
        modifiedAt: null,
        completedAt: at(11),
      },
      {
        id: 'lta',
        artifactType: 'raw_data_package',
        artifactId: 'pkg',
        locationId: 'archive',
        locationType: 'long_term_archive',
        status: 'PRESENT',
        checksum: 'sha256:aa',
        path: '/a/pkg.tar',
        onStorage: true,
        modifiedAt: at(10),
        completedAt: at(11),
      },
    ],
    archiveRecords: [
      {
        id: 1,
        operationId: OP,
        attempt: 1,
        generation: 1,
        state: 'PLANNED',
        archiveKey: 'pkg.tar',
        objectVersion: null,
        objectSha256: null,
        contentSha256: 'aa',
      },
      {
        id: 2,
        operationId: OP,
        attempt: 2,
        generation: 1,
        state: 'UPLOADED',
        archiveKey: 'pkg.tar',
        objectVersion: '1:2:3',
        objectSha256: 'bb',
        contentSha256: 'aa',
      },
      {
        id: 3,
        operationId: OP,
        attempt: 2,
        generation: 1,
        state: 'VERIFIED',
        archiveKey: 'pkg.tar',
        objectVersion: '1:2:3',
        objectSha256: 'bb',
        contentSha256: 'aa',
      },
    ],
    archiveObjects: [
      {
        operationId: OP,
        archiveKey: 'pkg.tar',
        path: '/a/pkg.tar',
        version: '1:2:3',
        sha256: 'bb',
      },
    ],
    receipts: [{ copyId: 'buf', archiveOperationId: OP, archiveDigest: 'aa' }],
    deletedMembers: [{ copyId: 'buf', path: '/b/pkg/MANIFEST.json', onStorage: false }],
    counts: [{ kind: 'long_term_archive', status: 'COMPLETED', n: 1 }],
  };
}

function nth<T>(items: readonly T[], i: number): T {
  const item = items[i];
  if (item === undefined) throw new Error(`no item ${i}`);
  return item;
}

const broken = (f: ChaosFacts) =>
  checkInvariants(f)
    .filter((i) => i.violations.length > 0)
    .map((i) => i.name);

describe('chaos invariants', () => {
  it('hold on a clean history, each having looked at something', () => {
    const results = checkInvariants(clean());
    expect(results.filter((r) => r.violations.length > 0)).toEqual([]);
    expect(results.every((r) => r.checked > 0)).toBe(true);
  });

  it.each<[string, (f: ChaosFacts) => ChaosFacts]>([
    [
      'every operation terminal',
      (f) => ({
        ...f,
        operations: [{ ...nth(f.operations, 0), status: 'FAILED', lastError: null }],
      }),
    ],
    [
      'every operation terminal',
      (f) => ({
        ...f,
        operations: [{ ...nth(f.operations, 0), status: 'IN_PROGRESS' }],
        transitions: f.transitions.slice(0, -1),
      }),
    ],
    [
      'one live copy of an artifact at a location',
      (f) => ({ ...f, copies: [...f.copies, { ...nth(f.copies, 1), id: 'lta2' }] }),
    ],
    [
      'no archive replaced',
      (f) => ({ ...f, archiveObjects: [{ ...nth(f.archiveObjects, 0), version: '1:9:9' }] }),
    ],
    [
      'no archive replaced',
      (f) => ({
        ...f,
        archiveRecords: [
          ...f.archiveRecords,
          { ...nth(f.archiveRecords, 1), id: 9, objectSha256: 'cc' },
        ],
      }),
    ],
    ['no deletion without a verified archive', (f) => ({ ...f, receipts: [] })],
    [
      'no deletion without a verified archive',
      (f) => ({ ...f, copies: [nth(f.copies, 0), { ...nth(f.copies, 1), checksum: 'sha256:ff' }] }),
    ],
    [
      'no deletion without a verified archive',
      (f) => ({
        ...f,
        archiveRecords: [
          ...f.archiveRecords,
          { ...nth(f.archiveRecords, 2), id: 4, state: 'VERIFY_FAILED', attempt: null },
        ],
      }),
    ],
    [
      'no deletion without a verified archive',
      (f) => ({ ...f, deletedMembers: [{ ...nth(f.deletedMembers, 0), onStorage: true }] }),
    ],
    [
      'PRESENT copies on storage',
      (f) => ({ ...f, copies: [nth(f.copies, 0), { ...nth(f.copies, 1), onStorage: false }] }),
    ],
    // A worker of attempt 1 completing after the reset: the machine refuses the stale attempt.
    [
      'transition paths valid',
      (f) => ({
        ...f,
        transitions: [
          ...f.transitions.slice(0, -1),
          { ...nth(f.transitions, 6), attempt: 1, by: 'w-1' },
        ],
      }),
    ],
    [
      'transition paths valid',
      (f) => ({
        ...f,
        transitions: [...f.transitions, { ...nth(f.transitions, 6), id: 12, from: 'COMPLETED' }],
      }),
    ],
    [
      'transition paths valid',
      (f) => ({ ...f, transitions: f.transitions.filter((x) => x.id !== 9) }),
    ],
    [
      'no stale write',
      (f) => ({
        ...f,
        steps: [...f.steps, { operationId: OP, generation: 1, name: 'extra', attempt: 3 }],
      }),
    ],
    // A worker of a superseded attempt wrote the archive copy's file after the operation completed.
    [
      'no stale write',
      (f) => ({ ...f, copies: [nth(f.copies, 0), { ...nth(f.copies, 1), modifiedAt: at(12) }] }),
    ],
    // The upload step, journaled by attempt 2, ran again under attempt 3.
    [
      'no stale write',
      (f) => ({
        ...f,
        archiveRecords: [...f.archiveRecords, { ...nth(f.archiveRecords, 1), id: 5, attempt: 3 }],
        transitions: [...f.transitions, { ...nth(f.transitions, 5), id: 20, attempt: 3 }],
      }),
    ],
    [
      'counts as stored',
      (f) => ({ ...f, counts: [{ kind: 'long_term_archive', status: 'COMPLETED', n: 2 }] }),
    ],
    // A write the tally missed: the operation is stored COMPLETED, counted where it was before.
    [
      'counts as stored',
      (f) => ({ ...f, counts: [{ kind: 'long_term_archive', status: 'IN_PROGRESS', n: 1 }] }),
    ],
  ])('%s fails on a planted violation', (name, plant) => {
    expect(broken(plant(clean()))).toContain(name);
  });

  it('recovery latency counts from the last fault before the reset, else from the status entered', () => {
    const facts = clean();
    expect(recoveries(facts, []).map((r) => [r.path, r.latencyMs, r.since])).toEqual([
      ['heartbeat_monitor', 5_000, 'entered'],
    ]);
    const fault = { kind: 'kill-worker' as const, at: at(4), until: at(4), detail: '' };
    expect(recoveries(facts, [fault]).map((r) => [r.latencyMs, r.since])).toEqual([
      [4_000, 'kill-worker'],
    ]);
    const figures = chaosFigures(
      facts,
      [fault],
      resolveRuntimeTiming({
        heartbeatIntervalMs: 250,
        heartbeatTimeoutMs: 4_000,
        reconcilerFloorMs: 8_000,
        ackWaitMs: 12_000,
      }),
    );
    expect(figures.find((f) => f.figure === 'recovery_heartbeat_monitor_max')).toMatchObject({
      value: 4_000,
      timer: 4_000,
      ratio: 1,
    });
    expect(figures.find((f) => f.figure === 'submit_to_scheduled_max')).toMatchObject({
      value: 1_000,
    });
  });
});
