import { describe, expect, it } from 'vitest';
import { printQueueStatus, queuesStatus } from '../../cli/commands/printQueueStatus.ts';
import { bulkRetryIds } from '../../dashboard/bulkRetry.ts';
import { escapeHtml } from '../../dashboard/html.ts';
import { idleUnserved } from '../../dashboard/idleUnserved.ts';
import { type LineageNode, lineageTree } from '../../dashboard/lineageTree.ts';
import { type QueueView, workersPage } from '../../dashboard/workersPage.ts';
import { classifyQueue, kindsOfQueue } from '../../machines/attention.ts';
import { DEFAULT_DEADLINES_MS } from '../../machines/deadlines.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import { queueReaders, readersOf } from '../../machines/queueReaders.ts';
import { LocationType, OperationType } from '../../machines/routing.ts';
import type { LineageLink } from '../../persistence/reads/selectLineage.ts';
import { likeLiteral, searchText, uuidPrefixRange } from '../../persistence/searchText.ts';

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
    readers: [],
    readersKnown: true,
    ...over,
  });
  const facts = { now: NOW, timing, heartbeats: new Map<string, number>() };
  const exact =
    'no live worker serves queue buffer_data_transfer_unpacking (3 waiting, the oldest for 12 min): no heartbeat younger than 5 min names it among the queues its worker reads; start a worker for it (`opstate worker --kinds unpack --handlers …`)';
  const conservative =
    'no live worker serves queue buffer_data_transfer_unpacking (3 waiting, the oldest for 12 min): no heartbeat younger than 5 min lists work from it; start a worker for it (`opstate worker --kinds unpack --handlers …`), or, if its workers are busy on other queues, give them more --concurrency';

  it('names a queue nobody reads with the attention list’s words', () => {
    expect(classifyQueue(queue(), facts)).toEqual({
      category: 'queue_unserved',
      subject: { type: 'queue', id: 'buffer_data_transfer_unpacking' },
      kind: OperationKind.UNPACK,
      state: 'UNSERVED',
      since: new Date(NOW - 12 * MIN).toISOString(),
      why: exact,
    });
  });

  it.each<[string, Partial<Parameters<typeof classifyQueue>[0]>, string | null]>([
    ['nobody reads it, work waits 12 min: listed', {}, exact],
    [
      'nobody reads it, work waited 1 s: listed at once',
      { oldestWaiting: new Date(NOW - 1000) },
      exact.replace('12 min', '1 s'),
    ],
    [
      'nobody reads it, work waits just now: listed at once',
      { oldestWaiting: new Date(NOW) },
      exact.replace('12 min', '0 s'),
    ],
    ['an idle live worker reads it: served', { readers: ['worker-g'] }, null],
    ['a live worker holds work from it: served', { served: true }, null],
    ['nothing waits: quiet', { waiting: 0, oldestWaiting: null }, null],
    // A live worker of an older version does not say what it reads: it may serve the queue idle.
    ['readers unknown, work waits 12 min: listed as before', { readersKnown: false }, conservative],
    [
      'readers unknown, work waits 4 min: not yet',
      { readersKnown: false, oldestWaiting: new Date(NOW - 4 * MIN) },
      null,
    ],
    [
      'readers unknown, exactly the timeout: not yet',
      { readersKnown: false, oldestWaiting: new Date(NOW - 5 * MIN) },
      null,
    ],
    [
      'readers unknown, another reads it: served',
      { readersKnown: false, readers: ['worker-n'] },
      null,
    ],
    [
      'readers unknown, a live worker holds from it: served',
      { readersKnown: false, served: true },
      null,
    ],
  ])('%s', (_, over, why) => {
    expect(classifyQueue(queue(over), facts)?.why ?? null).toBe(why);
  });

  it('lists nothing when heartbeats are not visible', () => {
    expect(classifyQueue(queue(), { ...facts, heartbeats: null })).toBeNull();
    expect(
      classifyQueue(queue({ readersKnown: false }), { ...facts, heartbeats: null }),
    ).toBeNull();
  });

  it('knows which kinds a queue serves by default', () => {
    expect(kindsOfQueue('source_data_transfer')).toEqual([OperationKind.TRANSFER]);
    expect(kindsOfQueue('buffer_data_transfer')).toEqual([]);
  });
});

describe('who reads each queue', () => {
  const reads = (...queues: string[]) => ({ queues });
  const beats = [
    { workerId: 'w-b', at: NOW - MIN, reads: reads('source_data_transfer') },
    {
      workerId: 'w-a',
      at: NOW - 2 * MIN,
      reads: reads('source_data_transfer', 'processing_staging'),
    },
    { workerId: 'w-idle', at: NOW, reads: reads() },
    { workerId: 'w-stale', at: NOW - 5 * MIN, reads: reads('buffer_data_transfer_unpacking') },
    { workerId: 'w-old', at: NOW - MIN },
    { workerId: 'w-old-stale', at: NOW - 6 * MIN },
  ];

  it('counts only live heartbeats, and names the live ones that do not say', () => {
    const readers = queueReaders(beats, NOW, timing.heartbeatTimeoutMs);
    expect(Object.fromEntries(readers.byQueue)).toEqual({
      source_data_transfer: ['w-a', 'w-b'],
      processing_staging: ['w-a'],
    });
    expect(readers.unknown).toEqual(['w-old']);
    expect(readersOf(readers, 'source_data_transfer')).toEqual({
      readers: ['w-a', 'w-b'],
      readersKnown: false,
    });
  });

  it('knows every reader once no live heartbeat is of the old form', () => {
    const readers = queueReaders(
      beats.filter((b) => b.workerId !== 'w-old'),
      NOW,
      timing.heartbeatTimeoutMs,
    );
    expect(readersOf(readers, 'buffer_data_transfer_unpacking')).toEqual({
      readers: [],
      readersKnown: true,
    });
    expect(readersOf(null, 'source_data_transfer')).toEqual({ readers: [], readersKnown: false });
  });
});

describe('the queue lines of opstate status', () => {
  const depth = (operationType: OperationType, waiting: number, inProgress: number) => ({
    route: { locationType: LocationType.SOURCE, operationType },
    waiting,
    inProgress,
    oldestWaiting: waiting === 0 ? null : new Date(NOW - MIN),
    served: false,
  });
  const depths = [
    depth(OperationType.DATA_TRANSFER, 2, 1),
    depth(OperationType.DATA_TRANSFER_PACKAGE_CREATION, 0, 1),
  ];
  const lines = (s: ReturnType<typeof queuesStatus>) => {
    const out: string[] = [];
    printQueueStatus(s, { out: (l) => out.push(l), err: (l) => out.push(l) });
    return out;
  };

  it('prints the busy queues with their live readers, and counts the quiet ones', () => {
    const readers = queueReaders(
      [
        { workerId: 'w-idle', at: NOW, reads: { queues: ['processing_staging'] } },
        { workerId: 'w-old', at: NOW },
      ],
      NOW,
      timing.heartbeatTimeoutMs,
    );
    const status = queuesStatus(depths, readers);
    expect(status.queues.find((q) => q.queue === 'source_data_transfer')).toEqual({
      queue: 'source_data_transfer',
      waiting: 2,
      inProgress: 1,
      oldestWaiting: new Date(NOW - MIN).toISOString(),
      readers: [],
    });
    expect(lines(status)).toEqual([
      '',
      'queue                                  waiting  in progress  live workers reading it',
      'processing_staging                           0            0  w-idle',
      'source_data_transfer                         2            1  none',
      'source_data_transfer_package_creation        0            1  none',
      '  (5 other queues: nothing waiting or in progress, no live worker reading them)',
      '  (w-old: live, of an older version: its heartbeat does not say which queues it reads)',
    ]);
  });

  it("lists every registered location's site queues, with their depth and their readers", () => {
    const cologne = { site: 'cologne', location: 'lta' };
    const archive = {
      ...cologne,
      locationType: LocationType.LONG_TERM_ARCHIVE,
      operationType: OperationType.LONG_TERM_ARCHIVE_TRANSFER,
    };
    const readers = queueReaders(
      [
        {
          workerId: 'w-bonn',
          at: NOW,
          reads: { queues: ['bonn_lta_long_term_archive_long_term_archive_transfer'] },
        },
      ],
      NOW,
      timing.heartbeatTimeoutMs,
    );
    const status = queuesStatus(
      [
        {
          route: archive,
          waiting: 4,
          inProgress: 0,
          oldestWaiting: new Date(NOW - MIN),
          served: false,
        },
      ],
      readers,
      [
        { site: 'cologne', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE },
        { site: 'bonn', name: 'lta', locationType: LocationType.LONG_TERM_ARCHIVE },
      ],
    );
    expect(status.queues.filter((q) => q.queue.includes('_lta_'))).toEqual([
      {
        queue: 'bonn_lta_long_term_archive_long_term_archive_transfer',
        waiting: 0,
        inProgress: 0,
        oldestWaiting: null,
        readers: ['w-bonn'],
      },
      {
        queue: 'cologne_lta_long_term_archive_long_term_archive_transfer',
        waiting: 4,
        inProgress: 0,
        oldestWaiting: new Date(NOW - MIN).toISOString(),
        readers: [],
      },
    ]);
    // The location nobody serves is on the attention list, with the worker to start.
    const item = classifyQueue(
      {
        route: archive,
        waiting: 4,
        oldestWaiting: new Date(NOW - MIN),
        served: false,
        ...readersOf(readers, 'cologne_lta_long_term_archive_long_term_archive_transfer'),
      },
      { now: NOW, timing, heartbeats: new Map<string, number>() },
    );
    expect(item?.subject).toEqual({
      type: 'queue',
      id: 'cologne_lta_long_term_archive_long_term_archive_transfer',
    });
    expect(item?.why).toContain(
      '`opstate worker --site cologne --kinds long_term_archive --handlers …`',
    );
    expect(kindsOfQueue('cologne_buf_buffer_data_transfer')).toEqual([OperationKind.TRANSFER]);
  });

  it('says who reads a queue is not known when heartbeats are not visible', () => {
    const status = queuesStatus(depths, null);
    expect(status.queues.every((q) => q.readers === null)).toBe(true);
    expect(lines(status).slice(2)).toEqual([
      'source_data_transfer                         2            1  not visible here',
      'source_data_transfer_package_creation        0            1  not visible here',
      '  (6 other queues: nothing waiting or in progress)',
    ]);
    expect(lines(queuesStatus([], null))).toEqual(['', 'queues: nothing waiting or in progress']);
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

describe('flow limits and idle locations on the /workers page', () => {
  const queue = (name: string, over: Partial<QueueView> = {}): QueueView => ({
    queue: name,
    kinds: kindsOfQueue(name),
    waiting: 0,
    inProgress: 0,
    oldestWaiting: null,
    liveWorkers: [],
    staleWorkers: [],
    attention: null,
    ...over,
  });
  const lta = (site: string) => ({
    site,
    name: 'lta',
    locationType: LocationType.LONG_TERM_ARCHIVE,
  });
  const ltaQueue = (site: string) => `${site}_lta_long_term_archive_long_term_archive_transfer`;

  it('flags a registered location only when none of its queues has work or a live reader', () => {
    const buf = { site: 'bonn', name: 'buf', locationType: LocationType.BUFFER };
    const queues = [
      queue(ltaQueue('cologne'), { liveWorkers: [{ workerId: 'w1', reads: true }] }),
      queue(ltaQueue('bonn')),
      queue(ltaQueue('paris'), { waiting: 2 }), // on the attention list instead
      // One of the buffer's three queues is read: the location is served.
      queue('bonn_buf_buffer_data_transfer'),
      queue('bonn_buf_buffer_data_transfer_unpacking', {
        liveWorkers: [{ workerId: 'w2', reads: true }],
      }),
    ];
    expect(idleUnserved([lta('cologne'), lta('bonn'), lta('paris'), buf], queues)).toEqual([
      'bonn/lta',
    ]);
  });

  it('shows each limit with its in-use and waiting counts, and the idle unserved locations', () => {
    const page = String(
      workersPage({
        at: new Date(NOW).toISOString(),
        heartbeatsVisible: true,
        heartbeatTimeoutMs: timing.heartbeatTimeoutMs,
        queues: [queue(ltaQueue('bonn'))],
        workers: [],
        limits: [
          { locationId: 'a', location: 'cologne/lta', kind: null, max: 2, inUse: 2, waiting: 7 },
          {
            locationId: 'a',
            location: 'cologne/lta',
            kind: OperationKind.LONG_TERM_ARCHIVE,
            max: 0,
            inUse: 1,
            waiting: 3,
          },
          { locationId: 'b', location: 'bonn/buf', kind: null, max: 4, inUse: 1, waiting: 0 },
        ],
        idleUnserved: ['bonn/lta'],
      }),
    );
    const row = (key: string) =>
      [
        ...(
          page.match(new RegExp(`<tr data-limit="${key}">([\\s\\S]*?)</tr>`))?.[1] ?? ''
        ).matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g),
      ].map((m) => m[1]?.replace(/<[^>]+>/g, '').trim());
    expect(row('cologne/lta')).toEqual(['cologne/lta', 'every kind', '2', '2', '7', 'full']);
    expect(row('cologne/lta:long_term_archive')).toEqual([
      'cologne/lta',
      'long_term_archive',
      '1',
      '0',
      '3',
      'parked',
    ]);
    expect(row('bonn/buf')).toEqual(['bonn/buf', 'every kind', '1', '4', '0', 'room for 3']);
    expect(page).toContain('(2 full or parked)');
    expect(page).toMatch(/id="idle-unserved"[\s\S]*<code>bonn\/lta<\/code>/);
    // Without limits or idle locations, neither section is drawn.
    const bare = String(
      workersPage({
        at: new Date(NOW).toISOString(),
        heartbeatsVisible: true,
        heartbeatTimeoutMs: timing.heartbeatTimeoutMs,
        queues: [],
        workers: [],
      }),
    );
    expect(bare).not.toContain('flow-limits');
    expect(bare).not.toContain('idle-unserved');
  });
});
