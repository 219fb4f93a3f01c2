import { describe, expect, it } from 'vitest';
import {
  classifyPackageStep,
  PACKAGE_WAITS,
  type PackageFacts,
  type PackageOperationFact,
  type PackageWait,
} from '../../machines/classifyPackageStep.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { OperationStatus } from '../../machines/operationMachine.ts';
import {
  derivePackageState,
  isPackageState,
  PACKAGE_STATES,
  type PackageCopy,
  type PackageState,
} from '../../machines/packageState.ts';

/**
 * The package state and the step it is in, derived from fact sets: every state of both package
 * types, every reason a package waits, and the moves between them.
 */
const K = OperationKind;
const NOW = Date.parse('2026-12-01T12:00:00Z');
const P = 'pkg-1';
const Q = 'pkg-2';
const D = 'dtp-1';
const SRC = 'loc-src';
const BUF = 'loc-buf';
const LTA = 'loc-lta';
const NAMES: Record<string, string> = {
  [SRC]: 'obs/source',
  [BUF]: 'cgn/buffer',
  [LTA]: 'cgn/lta',
};
const SUBJECT: Record<OperationKind, 'pkg' | 'dtp'> = {
  [K.RAW_DATA_PACKAGE]: 'pkg',
  [K.DATA_TRANSFER_PACKAGE]: 'dtp',
  [K.TRANSFER]: 'dtp',
  [K.UNPACK]: 'dtp',
  [K.LONG_TERM_ARCHIVE]: 'pkg',
  [K.STAGING]: 'pkg',
};
const TARGET: Record<OperationKind, string> = {
  [K.RAW_DATA_PACKAGE]: SRC,
  [K.DATA_TRANSFER_PACKAGE]: SRC,
  [K.TRANSFER]: BUF,
  [K.UNPACK]: BUF,
  [K.LONG_TERM_ARCHIVE]: LTA,
  [K.STAGING]: BUF,
};

let n = 0;
function op(
  kind: OperationKind,
  status: OperationStatus,
  over: Partial<PackageOperationFact> = {},
): PackageOperationFact {
  const target = over.targetLocationId ?? TARGET[kind];
  n += 1;
  return {
    id: `op-${n}`,
    kind,
    status,
    subjectId: SUBJECT[kind] === 'pkg' ? P : D,
    targetLocationId: target,
    target: NAMES[target] ?? null,
    attempt: 1,
    workerId: status === 'IN_PROGRESS' ? 'w-1' : null,
    notBefore: null,
    since: NOW - 60_000,
    lastError: status === 'FAILED' ? { message: 'disk full' } : null,
    completedTransitionId: status === 'COMPLETED' ? 10 : null,
    breaker: null,
    limit: null,
    ...over,
  };
}

/** P's archive copy at the long-term archive. */
const archived: PackageCopy = { artifactId: P, locationId: LTA, status: 'PRESENT' };

function rdp(operations: PackageOperationFact[], over: Partial<PackageFacts> = {}): PackageFacts {
  return {
    type: 'raw_data_package',
    id: P,
    members: [P],
    transferPackageId: D,
    operations,
    copies: [archived],
    pipelineCursor: 100,
    bundle: { members: 2, packaged: 2 },
    ...over,
  };
}

function dtp(operations: PackageOperationFact[], over: Partial<PackageFacts> = {}): PackageFacts {
  return {
    ...rdp(operations),
    type: 'data_transfer_package',
    id: D,
    members: [P, Q],
    copies: [archived, { ...archived, artifactId: Q }],
    ...over,
  };
}

const done = (kind: OperationKind, subjectId?: string) =>
  op(kind, 'COMPLETED', subjectId === undefined ? {} : { subjectId });
const throughUnpack = () => [
  done(K.RAW_DATA_PACKAGE),
  done(K.DATA_TRANSFER_PACKAGE),
  done(K.TRANSFER),
  done(K.UNPACK),
];

type Case = [string, PackageFacts, PackageState, PackageWait];
const CASES: Case[] = [
  ['a raw data package nothing ran on', rdp([]), 'PLANNED', 'not_started'],
  [
    'its packaging waits until a time ahead',
    rdp([op(K.RAW_DATA_PACKAGE, 'PENDING', { notBefore: NOW + 60_000 })]),
    'PACKAGING',
    'not_before',
  ],
  [
    'its packaging is due',
    rdp([op(K.RAW_DATA_PACKAGE, 'PENDING', { notBefore: NOW - 1 })]),
    'PACKAGING',
    'due',
  ],
  ['its packaging runs', rdp([op(K.RAW_DATA_PACKAGE, 'IN_PROGRESS')]), 'PACKAGING', 'in_progress'],
  [
    'packaged; the leader pass has not read the completion',
    rdp([op(K.RAW_DATA_PACKAGE, 'COMPLETED', { completedTransitionId: 101 })]),
    'PACKAGED',
    'leader_pass',
  ],
  [
    'packaged; bundling waits for the other member',
    rdp([done(K.RAW_DATA_PACKAGE)], { bundle: { members: 2, packaged: 1 } }),
    'PACKAGED',
    'members',
  ],
  [
    'packaged, in no transfer package',
    rdp([done(K.RAW_DATA_PACKAGE)], { transferPackageId: null, bundle: null }),
    'PACKAGED',
    'no_bundle',
  ],
  [
    'packaged, every member packaged, no bundling created',
    rdp([done(K.RAW_DATA_PACKAGE)]),
    'PACKAGED',
    'not_created',
  ],
  [
    'packaged, no pipeline runs',
    rdp([done(K.RAW_DATA_PACKAGE)], { pipelineCursor: null }),
    'PACKAGED',
    'not_created',
  ],
  [
    'bundling dispatched',
    rdp([done(K.RAW_DATA_PACKAGE), op(K.DATA_TRANSFER_PACKAGE, 'SCHEDULED')]),
    'TRANSFERRING',
    'dispatched',
  ],
  [
    'bundled, no transfer yet: still in its transferring step',
    rdp([done(K.RAW_DATA_PACKAGE), done(K.DATA_TRANSFER_PACKAGE)]),
    'TRANSFERRING',
    'not_created',
  ],
  [
    'the transfer is held by its circuit breaker',
    rdp([
      done(K.RAW_DATA_PACKAGE),
      done(K.DATA_TRANSFER_PACKAGE),
      op(K.TRANSFER, 'PENDING', { breaker: 'OPEN' }),
    ]),
    'TRANSFERRING',
    'breaker',
  ],
  [
    'the transfer waits on a full flow limit',
    rdp([
      done(K.RAW_DATA_PACKAGE),
      done(K.DATA_TRANSFER_PACKAGE),
      op(K.TRANSFER, 'PENDING', { limit: { max: 2, live: 2 } }),
    ]),
    'TRANSFERRING',
    'flow_limit',
  ],
  [
    'a limit with room holds nothing: due',
    rdp([done(K.DATA_TRANSFER_PACKAGE), op(K.TRANSFER, 'PENDING', { limit: { max: 2, live: 1 } })]),
    'TRANSFERRING',
    'due',
  ],
  [
    'the transfer failed for good',
    rdp([done(K.RAW_DATA_PACKAGE), done(K.DATA_TRANSFER_PACKAGE), op(K.TRANSFER, 'FAILED')]),
    'FAILED',
    'failed',
  ],
  [
    'a failed transfer a later one of the same (kind, subject, location) completed',
    rdp([done(K.RAW_DATA_PACKAGE), op(K.TRANSFER, 'FAILED'), done(K.TRANSFER)]),
    'TRANSFERRING',
    'not_created',
  ],
  [
    'a failure elsewhere does not stop live work: the live step shows, least advanced first',
    rdp([done(K.RAW_DATA_PACKAGE), op(K.TRANSFER, 'FAILED'), op(K.UNPACK, 'IN_PROGRESS')]),
    'TRANSFERRING',
    'in_progress',
  ],
  ['transferred and unpacked', rdp(throughUnpack()), 'TRANSFERRED', 'not_created'],
  [
    'archive running',
    rdp([...throughUnpack(), op(K.LONG_TERM_ARCHIVE, 'IN_PROGRESS')]),
    'ARCHIVING',
    'in_progress',
  ],
  ['archived', rdp([...throughUnpack(), done(K.LONG_TERM_ARCHIVE)]), 'ARCHIVED', 'done'],
  [
    'archived after a failed attempt was replaced',
    rdp([...throughUnpack(), op(K.LONG_TERM_ARCHIVE, 'FAILED'), done(K.LONG_TERM_ARCHIVE)]),
    'ARCHIVED',
    'done',
  ],
  [
    'archived at one site, still transferring to another: not done',
    rdp([
      ...throughUnpack(),
      done(K.LONG_TERM_ARCHIVE),
      op(K.TRANSFER, 'IN_PROGRESS', { targetLocationId: 'loc-2' }),
    ]),
    'TRANSFERRING',
    'in_progress',
  ],
  [
    'archiving at one site while the transfer to another waits: the least advanced live work',
    rdp([
      ...throughUnpack(),
      op(K.LONG_TERM_ARCHIVE, 'IN_PROGRESS'),
      op(K.TRANSFER, 'PENDING', { targetLocationId: 'loc-2', notBefore: NOW + 1_000 }),
    ]),
    'TRANSFERRING',
    'not_before',
  ],
  [
    'archived, but the archive copy is gone',
    rdp([...throughUnpack(), done(K.LONG_TERM_ARCHIVE)], {
      copies: [{ ...archived, status: 'DELETED' }],
    }),
    'TRANSFERRED',
    'archive_lost',
  ],
  [
    'a failed staging does not move a package',
    rdp([done(K.RAW_DATA_PACKAGE), op(K.STAGING, 'FAILED')], {
      transferPackageId: null,
      bundle: null,
    }),
    'PACKAGED',
    'no_bundle',
  ],
  [
    'cancelled by an operator',
    rdp([op(K.RAW_DATA_PACKAGE, 'FAILED', { lastError: { message: 'no', code: 'CANCELLED' } })]),
    'FAILED',
    'failed',
  ],
  // A data transfer package: a per-package step counts once every member did it.
  ['a transfer package that carries nothing', dtp([], { members: [] }), 'PLANNED', 'not_started'],
  [
    'a transfer package whose members are not packaged yet',
    dtp([], { bundle: { members: 2, packaged: 0 } }),
    'PLANNED',
    'members',
  ],
  [
    'one member packaging, one packaged',
    dtp([done(K.RAW_DATA_PACKAGE), op(K.RAW_DATA_PACKAGE, 'SCHEDULED', { subjectId: Q })], {
      bundle: { members: 2, packaged: 1 },
    }),
    'PACKAGING',
    'dispatched',
  ],
  [
    'one member of two packaged: not packaged yet',
    dtp([done(K.RAW_DATA_PACKAGE)], { bundle: { members: 2, packaged: 1 } }),
    'PLANNED',
    'members',
  ],
  [
    'both members packaged',
    dtp([done(K.RAW_DATA_PACKAGE), done(K.RAW_DATA_PACKAGE, Q)]),
    'PACKAGED',
    'not_created',
  ],
  [
    'its unpack ran; one member archived: still TRANSFERRED',
    dtp([...throughUnpack(), done(K.LONG_TERM_ARCHIVE)]),
    'TRANSFERRED',
    'not_created',
  ],
  [
    'one member archived, the other archiving',
    dtp([
      ...throughUnpack(),
      done(K.LONG_TERM_ARCHIVE),
      op(K.LONG_TERM_ARCHIVE, 'PENDING', { subjectId: Q }),
    ]),
    'ARCHIVING',
    'due',
  ],
  [
    'every member archived',
    dtp([...throughUnpack(), done(K.LONG_TERM_ARCHIVE), done(K.LONG_TERM_ARCHIVE, Q)]),
    'ARCHIVED',
    'done',
  ],
  [
    'its transfer waits on a flow limit',
    dtp([
      done(K.RAW_DATA_PACKAGE),
      done(K.RAW_DATA_PACKAGE, Q),
      done(K.DATA_TRANSFER_PACKAGE),
      op(K.TRANSFER, 'PENDING', { limit: { max: 1, live: 1 } }),
    ]),
    'TRANSFERRING',
    'flow_limit',
  ],
  [
    'its unpack failed',
    dtp([done(K.DATA_TRANSFER_PACKAGE), done(K.TRANSFER), op(K.UNPACK, 'FAILED')]),
    'FAILED',
    'failed',
  ],
];

describe('package state and step, derived from facts', () => {
  it.each(CASES)('%s', (_name, facts, state, wait) => {
    expect(derivePackageState(facts)).toBe(state);
    const step = classifyPackageStep(facts, NOW);
    expect(step.state).toBe(state);
    expect(step.wait).toBe(wait);
    expect(step.why.length).toBeGreaterThan(0);
  });

  it('reaches every state for a raw data package and for a data transfer package', () => {
    for (const type of ['raw_data_package', 'data_transfer_package']) {
      const reached = new Set(CASES.filter((c) => c[1].type === type).map((c) => c[2]));
      expect([...reached].sort(), type).toEqual([...PACKAGE_STATES].sort());
    }
  });

  it('gives every reason to wait', () => {
    expect(new Set(CASES.map((c) => c[3]))).toEqual(new Set(PACKAGE_WAITS));
  });

  it('says where and why in the line an operator reads', () => {
    const at = (facts: PackageFacts) => classifyPackageStep(facts, NOW);
    const running = at(rdp([done(K.DATA_TRANSFER_PACKAGE), op(K.TRANSFER, 'IN_PROGRESS')]));
    expect(running).toMatchObject({ kind: K.TRANSFER, location: 'cgn/buffer' });
    expect(running.why).toMatch(/^transfer at cgn\/buffer in progress \(attempt 1, worker w-1\)/);
    const limited = at(rdp([op(K.TRANSFER, 'PENDING', { limit: { max: 0, live: 0 } })]));
    expect(limited.why).toBe(
      'transfer at cgn/buffer waits on a flow limit at cgn/buffer: 0 of 0 running (parked)',
    );
    const failed = at(rdp([op(K.UNPACK, 'FAILED', { id: 'op-x', attempt: 3 })]));
    expect(failed.why).toBe(
      "unpack at cgn/buffer FAILED after attempt 3: disk full; its branch stops here until 'opstate retry op-x'",
    );
    const unread = at(rdp([op(K.TRANSFER, 'COMPLETED', { completedTransitionId: 140 })]));
    expect(unread.why).toMatch(/transition 140, cursor at 100/);
    const retry = at(rdp([op(K.UNPACK, 'PENDING', { attempt: 2, notBefore: NOW + 5_000 })]));
    expect(retry.why).toBe(
      "unpack at cgn/buffer waits until 2026-12-01T12:00:05.000Z (a retry's backoff), then is due",
    );
  });

  it('moves step by step as the pipeline runs (each move of the classification)', () => {
    const path: [PackageOperationFact[], PackageState, PackageWait][] = [];
    const ops: PackageOperationFact[] = [];
    const push = (o: PackageOperationFact, state: PackageState, wait: PackageWait) => {
      const at = ops.findIndex((x) => x.kind === o.kind && x.subjectId === o.subjectId);
      if (at >= 0) ops.splice(at, 1, o);
      else ops.push(o);
      path.push([[...ops], state, wait]);
    };
    for (const kind of [
      K.RAW_DATA_PACKAGE,
      K.DATA_TRANSFER_PACKAGE,
      K.TRANSFER,
      K.UNPACK,
      K.LONG_TERM_ARCHIVE,
    ]) {
      const live =
        kind === K.RAW_DATA_PACKAGE
          ? 'PACKAGING'
          : kind === K.LONG_TERM_ARCHIVE
            ? 'ARCHIVING'
            : 'TRANSFERRING';
      const after: PackageState =
        kind === K.RAW_DATA_PACKAGE
          ? 'PACKAGED'
          : kind === K.LONG_TERM_ARCHIVE
            ? 'ARCHIVED'
            : kind === K.UNPACK
              ? 'TRANSFERRED'
              : 'TRANSFERRING';
      push(op(kind, 'PENDING'), live, 'due');
      push(op(kind, 'SCHEDULED'), live, 'dispatched');
      push(op(kind, 'IN_PROGRESS'), live, 'in_progress');
      push(
        op(kind, 'COMPLETED', { completedTransitionId: 200 }),
        after,
        kind === K.LONG_TERM_ARCHIVE ? 'done' : 'leader_pass',
      );
    }
    // The state only ever moves forward along the pipeline.
    const states = path.map(([operations]) =>
      PACKAGE_STATES.indexOf(derivePackageState(rdp(operations))),
    );
    expect(states).toEqual([...states].sort((a, b) => a - b));
    for (const [operations, state, wait] of path) {
      expect(
        classifyPackageStep(rdp(operations), NOW),
        JSON.stringify(operations.map((o) => [o.kind, o.status])),
      ).toMatchObject({ state, wait });
    }
  });

  it('narrows an outside value to a state', () => {
    expect(isPackageState('ARCHIVED')).toBe(true);
    expect(isPackageState('archived')).toBe(false);
    expect(isPackageState(undefined)).toBe(false);
  });
});
