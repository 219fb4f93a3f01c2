import { describe, expect, it } from 'vitest';
import { bulkRetryIds } from '../../dashboard/bulkRetry.ts';
import { escapeHtml } from '../../dashboard/html.ts';
import { type LineageNode, lineageTree } from '../../dashboard/lineageTree.ts';
import { classifyQueue, kindsOfQueue } from '../../machines/attention.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { LocationType, OperationType } from '../../machines/routing.ts';
import { likeLiteral, searchText, uuidPrefixRange } from '../../persistence/searchText.ts';
import type { LineageLink } from '../../persistence/sql/selectLineage.ts';

const NOW = Date.parse('2026-12-01T12:00:00Z');
const MIN = 60_000;
const timing = {
  heartbeatTimeoutMs: 5 * MIN,
  reconcilerFloorMs: 60 * MIN,
  deadlines: DEFAULT_DEADLINES_MS,
};
const unpack = {
  locationType: LocationType.BUFFER,
  operationType: OperationType.DATA_TRANSFER_UNPACKING,
};

describe('the queue rule', () => {
  const queue = (over: Partial<Parameters<typeof classifyQueue>[0]> = {}) => ({
    route: unpack,
    waiting: 3,
    oldestWaiting: new Date(NOW - 12 * MIN),
    served: false,
    ...over,
  });
  const facts = { now: NOW, timing, heartbeats: new Map<string, number>() };

  it('names a queue whose work waits longer than the heartbeat timeout with no live worker', () => {
    expect(classifyQueue(queue(), facts)).toEqual({
      category: 'queue_unserved',
      subject: { type: 'queue', id: 'buffer_data_transfer_unpacking' },
      kind: OperationKind.UNPACK,
      state: 'UNSERVED',
      since: new Date(NOW - 12 * MIN).toISOString(),
      why: 'no live worker serves queue buffer_data_transfer_unpacking (3 waiting, the oldest for 12 min): no heartbeat younger than 5 min lists work from it; start a worker for it (`opstate worker --kinds unpack --handlers …`), or, if its workers are busy on other queues, give them more --concurrency',
    });
  });

  it('is quiet while a live worker serves it, nothing waits, the wait is short, or heartbeats are not visible', () => {
    expect(classifyQueue(queue({ served: true }), facts)).toBeNull();
    expect(classifyQueue(queue({ waiting: 0, oldestWaiting: null }), facts)).toBeNull();
    expect(classifyQueue(queue({ oldestWaiting: new Date(NOW - 4 * MIN) }), facts)).toBeNull();
    expect(classifyQueue(queue(), { ...facts, heartbeats: null })).toBeNull();
  });

  it('knows which kinds a queue serves by default', () => {
    expect(kindsOfQueue('source_data_transfer')).toEqual([OperationKind.TRANSFER]);
    expect(kindsOfQueue('buffer_data_transfer')).toEqual([]);
  });
});

describe('search text', () => {
  it('makes %, _ and \\ plain characters of a LIKE pattern', () => {
    expect(likeLiteral(`100%_done\\'x'`)).toBe(`100\\%\\_done\\\\'x'`);
  });

  it('reads the start of a uuid as a key range, and nothing else', () => {
    expect(uuidPrefixRange('019ADB2E-6c')).toEqual([
      '019adb2e-6c00-0000-0000-000000000000',
      '019adb2e-6cff-ffff-ffff-ffffffffffff',
    ]);
    const id = '019adb2e-6c1e-7f3a-9b2d-5e8f0a1c2d3e';
    expect(uuidPrefixRange(id)).toEqual([id, id]);
    expect(uuidPrefixRange('019a-')).toBeNull();
    expect(uuidPrefixRange('checksum')).toBeNull();
    expect(uuidPrefixRange(`${id}0`)).toBeNull();
  });

  it('trims, treats blank as no text and refuses a long one', () => {
    expect(searchText('  disk full ')).toBe('disk full');
    expect(searchText('   ')).toBeUndefined();
    expect(searchText(null)).toBeUndefined();
    expect(() => searchText('x'.repeat(201))).toThrow(/use at most 200/);
  });
});

describe('bulk retry ids', () => {
  const id = '019adb2e-6c1e-7f3a-9b2d-5e8f0a1c2d3e';
  it('takes up to 100 uuids, once each, and refuses anything else whole', () => {
    expect(bulkRetryIds([id, id])).toEqual([id]);
    expect(() => bulkRetryIds([])).toThrow(/non-empty array/);
    expect(() => bulkRetryIds('x')).toThrow(/non-empty array/);
    expect(() => bulkRetryIds([id, 'nope'])).toThrow(/"nope" is not a uuid/);
    expect(() => bulkRetryIds(Array.from({ length: 101 }, () => id))).toThrow(
      'at most 100 operations per bulk retry, got 101; retry them a page at a time',
    );
  });
});

describe('the lineage tree', () => {
  const link = (depth: number, via: string, copy: string, op: string | null): LineageLink => ({
    depth,
    via,
    copy: {
      id: copy,
      artifactType: 'raw_data_file',
      artifactId: copy,
      artifactName: copy,
      location: 'site/src',
      status: 'PRESENT',
    },
    operation:
      op === null ? null : { id: op, kind: OperationKind.RAW_DATA_PACKAGE, status: 'COMPLETED' },
  });
  it('hangs each link under the copy whose operation it was reached through', () => {
    // As the walk returns them: by depth, so all the files after both packages.
    const links = [
      link(1, 'bundle', 'pkg-a', 'pack-a'),
      link(1, 'bundle', 'pkg-b', 'pack-b'),
      link(2, 'pack-a', 'a1', null),
      link(2, 'pack-a', 'a2', null),
      link(2, 'pack-b', 'b1', null),
      link(3, 'gone', 'orphan', null),
    ];
    const shape = (nodes: readonly LineageNode[]): unknown =>
      nodes.map((n) => [n.link.copy.id, shape(n.children)]);
    expect(shape(lineageTree(links))).toEqual([
      [
        'pkg-a',
        [
          ['a1', []],
          ['a2', []],
        ],
      ],
      ['pkg-b', [['b1', []]]],
    ]);
  });
});

describe('escaping', () => {
  it('turns every markup character of a value into text', () => {
    expect(escapeHtml(`<script>"'&`)).toBe('&lt;script&gt;&quot;&#39;&amp;');
  });
});
