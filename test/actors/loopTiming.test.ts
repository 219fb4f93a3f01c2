import { describe, expect, it } from 'vitest';
import { type LeaseStore, startLeadership } from '../../control-plane/Leadership.ts';
import { loopWaitMs, passFailureLine, startLoop } from '../../loops/Loop.ts';
import { untilReachable } from '../../loops/untilReachable.ts';
import type { FailureClass } from '../../machines/classifyFailure.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import type { Lease } from '../../persistence/LeaseRepository.ts';
import type { Database } from '../../persistence/openDatabase.ts';

const outage = () =>
  new OpstateError(OpstateErrorCode.DATABASE, 'connect ECONNREFUSED', { retryable: true });

describe('loop backoff', () => {
  const rows: [number, number, number][] = [
    [1_000, 0, 1_000],
    [1_000, 1, 1_000],
    [1_000, 2, 2_000],
    [1_000, 3, 4_000],
    [1_000, 4, 8_000],
    [1_000, 50, 8_000],
    [10_000, 4, 30_000], // capped at 30 s
    [60_000, 3, 60_000], // never below the interval
  ];
  it.each(rows)('interval %i ms after %i failures waits %i ms', (interval, failures, wait) => {
    expect(loopWaitMs(interval, failures)).toBe(wait);
  });
});

describe('what a failed pass logs', () => {
  const rows: [FailureClass, number, boolean, string | undefined][] = [
    ['outage', 1, false, 'WARNING relay cannot reach the database or broker; backing off'],
    ['outage', 5, true, undefined],
    ['not_leader', 1, false, 'INFO relay pass refused: this process no longer leads'],
    ['defect', 1, false, 'ERROR relay pass failed; retrying'],
    ['defect', 2, false, 'DEBUG relay pass failed; retrying'],
    ['lost_race', 1, false, 'ERROR relay pass failed; retrying'],
  ];
  it.each(rows)('%s (failure %i, in an outage: %s)', (kind, failures, inOutage, line) => {
    const l = passFailureLine({ name: 'relay', kind, err: new Error('x'), failures, inOutage });
    expect(l === undefined ? undefined : `${l.level} ${l.message}`).toBe(line);
  });
});

describe('a loop on a simulated clock', () => {
  it('backs off while the outage lasts (×2 each failure, at most ×8), says so once, and once when it is over', async () => {
    const clock = new SimulatedClock(0);
    const logger = memoryLogger();
    const passes: number[] = [];
    const loop = startLoop({
      name: 'scheduler',
      intervalMs: 1_000,
      clock,
      logger,
      pass: async () => {
        passes.push(clock.now());
        if (passes.length <= 5) throw outage();
        return false;
      },
    });
    await clock.advance(24_000);
    expect(passes).toEqual([0, 1_000, 3_000, 7_000, 15_000, 23_000, 24_000]);
    expect(logger.lines.map((l) => [l.level, l.message, l.fields.afterMs])).toEqual([
      ['WARNING', 'scheduler cannot reach the database or broker; backing off', undefined],
      ['INFO', 'scheduler recovered from the outage', 23_000],
    ]);
    loop.wake(); // cuts the wait short
    await clock.advance(0);
    expect(passes.at(-1)).toBe(24_000);
    expect(passes).toHaveLength(8);
    await loop.stop();
  });

  it('runs again at once while a pass says there is more', async () => {
    const clock = new SimulatedClock(0);
    let left = 3;
    const passes: number[] = [];
    const loop = startLoop({
      name: 'relay',
      intervalMs: 250,
      clock,
      logger: memoryLogger(),
      pass: async () => {
        passes.push(clock.now());
        return left-- > 0;
      },
    });
    await clock.advance(250);
    expect(passes).toEqual([0, 0, 0, 0, 250]);
    await loop.stop();
  });
});

describe('waiting for a server at start', () => {
  it('retries an outage with doubling waits up to the cap, warns once a minute, and says when it got through', async () => {
    const clock = new SimulatedClock(0);
    const logger = memoryLogger();
    const tries: number[] = [];
    const reached = untilReachable(
      'Postgres',
      async () => {
        tries.push(clock.now());
        if (tries.length <= 9) throw outage();
        return 'up';
      },
      { logger, clock },
    );
    await clock.advance(120_000);
    expect(await reached).toBe('up');
    // 250, 500, 1000, 2000, 4000, 8000, then the 10 s cap.
    expect(tries).toEqual([0, 250, 750, 1_750, 3_750, 7_750, 15_750, 25_750, 35_750, 45_750]);
    expect(logger.lines.map((l) => l.level)).toEqual(['WARNING', 'INFO']);
    expect(logger.lines[1]?.fields).toEqual({ waitedMs: 45_750, tries: 10 });
  });

  it('stops waiting when told to give up, throwing the outage, and says why', async () => {
    const clock = new SimulatedClock(0);
    const logger = memoryLogger();
    let holding = true;
    let tries = 0;
    const failure = outage();
    const waiting = untilReachable(
      'Postgres (completing operation x)',
      async () => {
        tries++;
        throw failure;
      },
      {
        logger,
        clock,
        initialBackoffMs: 100,
        maxBackoffMs: 100,
        giveUp: () => (holding ? undefined : 'the worker is stopping'),
      },
    );
    const settled = waiting.then(
      () => 'resolved',
      (err: unknown) => err,
    );
    await clock.advance(1_000);
    expect(tries).toBe(11);
    holding = false;
    await clock.advance(100);
    expect(await settled).toBe(failure);
    expect(tries).toBe(12);
    expect(logger.lines.map((l) => `${l.level} ${l.message}`)).toEqual([
      'WARNING Postgres (completing operation x) unreachable; waiting for it and retrying',
      'WARNING Postgres (completing operation x) unreachable; no longer waiting: the worker is stopping',
    ]);
  });

  it('throws anything that is not an outage at once', async () => {
    const clock = new SimulatedClock(0);
    const bad = new OpstateError(OpstateErrorCode.CONFIG, 'bad url');
    await expect(
      untilReachable('Postgres', async () => Promise.reject(bad), {
        logger: memoryLogger(),
        clock,
      }),
    ).rejects.toBe(bad);
  });
});

/** The lease table in memory, judged by the simulated clock; `down` makes every call fail. */
function memoryLeases(clock: SimulatedClock) {
  let row: { holder: string; epoch: number; expiresAt: number } | undefined;
  const state = { down: false, frozen: new Map<string, Promise<void>>(), renewals: 0 };
  const wakers = new Map<string, () => void>();
  const freeze = (holder: string) =>
    state.frozen.set(holder, new Promise<void>((resolve) => wakers.set(holder, resolve)));
  const thaw = (holder: string) => {
    state.frozen.delete(holder);
    wakers.get(holder)?.();
  };
  const lease = (): Lease => ({
    name: 'opstate',
    holder: row?.holder ?? '',
    epoch: row?.epoch ?? 0,
    acquiredAt: new Date(0),
    renewedAt: new Date(0),
    expiresAt: new Date(row?.expiresAt ?? 0),
    expired: (row?.expiresAt ?? 0) <= clock.now(),
  });
  const gate = async (holder?: string) => {
    if (holder !== undefined) await state.frozen.get(holder);
    if (state.down) throw outage();
  };
  const holders = new Map<number, string>();
  const leases: (holder: string) => LeaseStore = (holder) => ({
    acquire: async (_name, who, ms) => {
      await gate(holder);
      if (row !== undefined && row.expiresAt > clock.now()) return undefined;
      row = { holder: who, epoch: (row?.epoch ?? 0) + 1, expiresAt: clock.now() + ms };
      holders.set(row.epoch, who);
      return lease();
    },
    renew: async (fence, ms) => {
      await gate(holder);
      if (row?.epoch !== fence.epoch) return undefined;
      state.renewals++;
      row.expiresAt = clock.now() + ms;
      return lease();
    },
    release: async (fence) => {
      await gate(holder);
      if (row?.epoch === fence.epoch) row.expiresAt = clock.now();
    },
  });
  return { leases, state, freeze, thaw };
}

describe('leadership on a simulated clock', () => {
  const POLL = 1_000;
  const LEASE = 10_000;
  const lead = (clock: SimulatedClock, mem: ReturnType<typeof memoryLeases>, holder: string) => {
    const events: string[] = [];
    const logger = memoryLogger();
    const leadership = startLeadership({
      database: {} as Database,
      leases: mem.leases(holder),
      name: 'opstate',
      pollMs: POLL,
      leaseMs: LEASE,
      clock,
      logger,
      holder,
      onElected: async (term) => {
        events.push(`elected ${term.fence.epoch} at ${clock.now()}`);
        return async () => {
          events.push(`resigned at ${clock.now()}`);
        };
      },
    });
    return { leadership, events, logger };
  };

  it('a leader renews at every poll; cut off from the database, it steps down when its own reckoning of the lease runs out', async () => {
    const clock = new SimulatedClock(0);
    const mem = memoryLeases(clock);
    const a = lead(clock, mem, 'a');
    await clock.advance(0);
    expect(a.leadership.isLeader).toBe(true);
    await clock.advance(5 * POLL);
    expect(mem.state.renewals).toBe(5);
    mem.state.down = true; // last renewal landed at 5 s: the lease runs to 15 s
    await clock.advance(LEASE - 1);
    expect(a.leadership.isLeader).toBe(true);
    expect(a.events).toEqual(['elected 1 at 0']);
    await clock.advance(1);
    expect(a.leadership.isLeader).toBe(false);
    expect(a.events).toEqual(['elected 1 at 0', `resigned at ${5 * POLL + LEASE}`]);
    expect(a.logger.lines.map((l) => l.message)).toContain(
      'control plane could not renew its lease in time; stepping down',
    );
    mem.state.down = false;
    await clock.advance(POLL);
    expect(a.events.at(-1)).toBe(`elected 2 at ${6 * POLL + LEASE}`); // the lease had lapsed
    await a.leadership.stop();
  });

  it('a frozen leader is replaced once its lease lapses, within the lease plus one poll; woken, it finds another epoch and stays down', async () => {
    const clock = new SimulatedClock(0);
    const mem = memoryLeases(clock);
    const a = lead(clock, mem, 'a');
    await clock.advance(0);
    const b = lead(clock, mem, 'b');
    await clock.advance(3 * POLL);
    expect([a.leadership.isLeader, b.leadership.isLeader]).toEqual([true, false]);
    mem.freeze('a'); // its next renewal (at 4 s) does not land; the last one did at 3 s
    await clock.advance(LEASE - 1);
    expect(b.events).toEqual([]);
    expect(a.leadership.isLeader).toBe(true); // by its own reckoning, until 13 s
    await clock.advance(1);
    expect(b.events).toEqual([`elected 2 at ${3 * POLL + LEASE}`]);
    expect(a.leadership.isLeader).toBe(false); // its reckoning ran out: no pass starts
    mem.thaw('a'); // the renewal sent at 4 s lands now and finds epoch 2
    await clock.advance(POLL);
    expect(a.events).toEqual(['elected 1 at 0', `resigned at ${3 * POLL + LEASE}`]);
    expect(a.logger.lines.map((l) => l.message)).toContain(
      'control plane lost its lease to another replica; stepping down',
    );
    await clock.advance(5 * POLL);
    expect([a.leadership.isLeader, b.leadership.isLeader]).toEqual([false, true]);
    await a.leadership.stop();
    await b.leadership.stop();
  });
});
