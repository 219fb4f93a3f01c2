import { systemClock } from '../../machines/Clock.ts';
import { OPERATION_KINDS } from '../../machines/OperationKind.ts';
import { OPERATION_STATUSES } from '../../machines/operationMachine.ts';
import { queueReaders } from '../../machines/queueReaders.ts';
import {
  CircuitBreakerRepository,
  type CircuitBreakerView,
} from '../../persistence/CircuitBreakerRepository.ts';
import { FlowLimitRepository } from '../../persistence/FlowLimitRepository.ts';
import { LeaseRepository } from '../../persistence/LeaseRepository.ts';
import { countPackageStates } from '../../persistence/reads/countPackageStates.ts';
import { selectCopyStatus } from '../../persistence/reads/selectCopyStatus.ts';
import { selectFlowLimitLoad } from '../../persistence/reads/selectFlowLimitLoad.ts';
import { selectQueueDepths } from '../../persistence/reads/selectQueueDepths.ts';
import { selectLocationsAt } from '../../persistence/reads/selectRoutedLocations.ts';
import {
  selectLiveTallyDrift,
  selectStatusCounts,
} from '../../persistence/reads/selectStatusCounts.ts';
import { selectWaiting } from '../../persistence/reads/selectWaiting.ts';
import {
  type AttentionSource,
  attentionOf,
  attentionSourceFromEnv,
  printAttention,
} from '../attentionFromEnv.ts';
import { type Command, defineCommand, optionsOf } from '../Command.ts';
import { type DatabaseOpener, databaseFromEnv } from '../runtimeFromEnv.ts';
import { printCopyStatus } from './printCopyStatus.ts';
import { printPackageStates } from './printPackageStates.ts';
import { printQueueStatus, queuesStatus } from './printQueueStatus.ts';

/** A breaker in `opstate status --json`. */
export interface CircuitBreakerStatus {
  readonly kind: string;
  readonly locationId: string;
  /** `site/name` of the location. */
  readonly location: string;
  readonly state: string;
  readonly consecutiveFailures: number;
  /** When it (last) opened, ISO. */
  readonly openedAt: string | null;
  /** The last failure it counted: message, retryable, code?, operationId, attempt, at. */
  readonly lastError: CircuitBreakerView['lastFailure'];
}

function toStatus(b: CircuitBreakerView): CircuitBreakerStatus {
  return {
    kind: b.kind,
    locationId: b.locationId,
    location: b.location,
    state: b.state,
    consecutiveFailures: b.consecutiveFailures,
    openedAt: b.openedAt?.toISOString() ?? null,
    lastError: b.lastFailure,
  };
}

/** A control plane's leadership in `opstate status --json`. */
export interface LeaderStatus {
  /** The deployment (`OPSTATE_PREFIX`) the lease is for. */
  readonly name: string;
  /** The leading replica: `<host>:<pid>:<random>`. */
  readonly holder: string;
  readonly epoch: number;
  /** When this holder took the lease (leads since), ISO. */
  readonly since: string;
  readonly renewedAt: string;
  readonly expiresAt: string;
  /** The lease lapsed and no standby has taken it yet: nobody leads. */
  readonly expired: boolean;
}

/** Left-aligned columns, two spaces apart. */
function table(rows: readonly string[][]): string[] {
  const widths = (rows[0] ?? []).map((_, n) => Math.max(...rows.map((r) => (r[n] ?? '').length)));
  return rows.map((r) =>
    r.map((cell, n) => (n === r.length - 1 ? cell : cell.padEnd(widths[n] as number))).join('  '),
  );
}

/**
 * `opstate status [--json]`: who leads each control plane and since when, operation counts per
 * kind × status (every kind and status shown), the raw data packages and data transfer packages
 * per derived state (`countPackageStates`), the PENDING ones waiting for a time ahead (a delayed
 * start or a retry's backoff), the flow limits with what runs under each, the circuit breakers that are not CLOSED (parked
 * or probing (kind, location) pairs), the physical copies per location type × status with the
 * deletions in progress and failed, each routing queue's waiting and in-progress depth with the live
 * workers reading it (by their heartbeats), then the attention list the dashboard shows (first page of
 * each category). JSON shape: `{"leaders": [{name, holder, epoch, since, renewedAt, expiresAt,
 * expired}], "operations": {"<kind>": {"PENDING": n, …}}, "packages": {"raw_data_package":
 * {"PLANNED": n, …, "FAILED": n}, "data_transfer_package": {…}} (per derived package state),
 * "waiting": {"<kind>": n} (PENDING until
 * a time ahead), "countsDrift": [{kind, status, tallied, stored}] (live kinds and statuses whose
 * count differs from the rows; empty while right), "circuitBreakers": [{kind, locationId, location,
 * state, consecutiveFailures, openedAt, lastError}], "flowLimits": [{locationId, location, kind,
 * max, live, waiting (PENDING in its scope), updatedAt, updatedBy}],
 * "copies": {"<location type>": {"PRESENT": n, …}}, "deletions": {inProgress: […], failed: […]},
 * "queues": [{queue, waiting, inProgress, oldestWaiting, readers}] (readers null when heartbeats are
 * not visible), "queueReadersUnknown": [<live worker ids whose heartbeat does not say what they
 * read>], "attention": {at, heartbeatsVisible, sections: [{category, total, totalCapped, next,
 * items: [{category, subject: {type, id}, kind, state, since, why}]}]}}`.
 *
 * @example
 * ```ts
 * await createStatusCommand(() => Promise.resolve(database)).run(['--json'], io);
 * ```
 */
export function createStatusCommand(
  open: DatabaseOpener = databaseFromEnv,
  attentionSource: (flags: {
    insecureNats?: boolean;
  }) => Promise<AttentionSource> = attentionSourceFromEnv,
): Command {
  const summary =
    'Who leads the control plane, operation counts per kind and status, packages per derived state, breakers not closed, copies and their deletions, queues and who reads them, what needs attention';
  return defineCommand('status', summary, (program, ctx) => {
    program
      .command('status')
      .description(summary)
      .option(
        '--json',
        'print the leaders, operations, packages, breakers, copies, deletions, queues and attention as one JSON object',
      )
      .option(
        '--insecure-nats',
        'read heartbeats from a NATS that accepts clients without credentials (development only; as OPSTATE_NATS_INSECURE=1)',
      )
      .action(
        ctx.action(async (cmd) => {
          const values = optionsOf<{ json?: boolean; insecureNats?: boolean }>(cmd);
          const io = ctx.io;
          const database = await open({ io: ctx.io });
          try {
            const counts = await selectStatusCounts(database);
            const countsDrift = await selectLiveTallyDrift(database);
            const packages = await countPackageStates(database);
            const waiting = await selectWaiting(database, new Date(systemClock.now()));
            const load = await selectFlowLimitLoad(database);
            const waitingBehind = (l: { locationId: string; kind: string | null }) =>
              load.find((x) => x.locationId === l.locationId && x.kind === l.kind)?.waiting ?? 0;
            const flowLimits = (await new FlowLimitRepository(database).list()).map((l) => ({
              ...l,
              waiting: waitingBehind(l),
            }));
            const breakers = (await new CircuitBreakerRepository(database).listNotClosed()).map(
              toStatus,
            );
            const leaders: LeaderStatus[] = (await new LeaseRepository(database).list()).map(
              (l) => ({
                name: l.name,
                holder: l.holder,
                epoch: l.epoch,
                since: l.acquiredAt.toISOString(),
                renewedAt: l.renewedAt.toISOString(),
                expiresAt: l.expiresAt.toISOString(),
                expired: l.expired,
              }),
            );
            const copies = await selectCopyStatus(database);
            // The dashboard's attention list, by the same rules, and who reads each queue, by
            // one listing of the heartbeats.
            const source = await attentionSource(
              values.insecureNats === true ? { insecureNats: true } : {},
            );
            const now = systemClock.now();
            let warning = source.warning;
            const { attention, queues } = await (async () => {
              // A bucket not created yet (no control plane has run) or a broker gone since the
              // connect: said, and judged without heartbeats, as when NATS cannot be reached.
              const beats =
                source.heartbeats === null
                  ? null
                  : await source.heartbeats.list().catch((err: unknown) => {
                      warning = `heartbeats not read: ${err instanceof Error ? err.message : String(err)}`;
                      return null;
                    });
              const readers =
                beats === null ? null : queueReaders(beats, now, source.timing.heartbeatTimeoutMs);
              return {
                attention: await attentionOf(database, source.timing, beats, now),
                queues: queuesStatus(
                  await selectQueueDepths(database, []),
                  readers,
                  await selectLocationsAt(database),
                ),
              };
            })().finally(() => source.close());
            if (warning !== undefined) io.err(`opstate status: ${warning}`);
            if (values.json === true) {
              io.out(
                JSON.stringify({
                  leaders,
                  operations: counts,
                  packages,
                  waiting,
                  countsDrift,
                  circuitBreakers: breakers,
                  flowLimits,
                  copies: copies.copies,
                  deletions: { inProgress: copies.inProgress, failed: copies.failed },
                  queues: queues.queues,
                  queueReadersUnknown: queues.readersUnknown,
                  attention,
                }),
              );
              return 0;
            }

            const width = Math.max(...OPERATION_KINDS.map((k) => k.length), 'kind'.length);
            const cols = OPERATION_STATUSES.map((s) => s.length);
            io.out(['kind'.padEnd(width), ...OPERATION_STATUSES].join('  '));
            for (const kind of OPERATION_KINDS) {
              const cells = OPERATION_STATUSES.map((s, n) =>
                String(counts[kind][s]).padStart(cols[n] as number),
              );
              io.out([kind.padEnd(width), ...cells].join('  '));
            }
            const waits = OPERATION_KINDS.filter((k) => waiting[k] > 0);
            if (waits.length > 0) {
              io.out(
                `waiting to start (a delayed start or a retry's backoff; not stuck): ${waits.map((k) => `${waiting[k]} ${k}`).join(', ')}`,
              );
            }
            printPackageStates(packages, io);
            if (countsDrift.length > 0) {
              io.out('');
              io.out(
                'the counts of live work differ from the rows (a write bypassed the triggers; `opstate recount` puts them back):',
              );
              for (const d of countsDrift) {
                io.out(`  ${d.kind} ${d.status}: the counts say ${d.tallied}, ${d.stored} stored`);
              }
            }
            io.out('');
            if (leaders.length === 0) io.out('leader: none (no control plane has run)');
            for (const l of leaders) {
              io.out(
                l.expired
                  ? `leader of ${l.name}: none (the lease of ${l.holder} lapsed at ${l.expiresAt}; a standby takes over at its next poll)`
                  : `leader of ${l.name}: ${l.holder} since ${l.since} (epoch ${l.epoch}, lease renewed ${l.renewedAt}, until ${l.expiresAt})`,
              );
            }
            if (breakers.length > 0) {
              io.out('');
              io.out('circuit breakers (not closed: scheduling parked or probing)');
              const header = ['kind', 'location', 'state', 'failures', 'since', 'last error'];
              const rows = breakers.map((b) => [
                b.kind,
                `${b.location} (${b.locationId})`,
                b.state,
                String(b.consecutiveFailures),
                b.openedAt ?? '',
                b.lastError?.message ?? '',
              ]);
              for (const line of table([header, ...rows])) io.out(line);
            }
            if (flowLimits.length > 0) {
              io.out('');
              io.out('flow limits (at most this many SCHEDULED or IN_PROGRESS at once)');
              const rows = flowLimits.map((l) => [
                `${l.location} (${l.locationId})`,
                l.kind ?? '(every kind)',
                `${l.live} of ${l.max}${l.max === 0 ? ' (parked)' : l.live >= l.max ? ' (full)' : ''}`,
                String(l.waiting),
              ]);
              const header = ['location', 'kind', 'running', 'waiting (PENDING)'];
              for (const line of table([header, ...rows])) io.out(line);
            }
            printCopyStatus(copies, io);
            printQueueStatus(queues, io);
            io.out('');
            printAttention(attention, io, now);
            return 0;
          } finally {
            await database.close();
          }
        }),
      );
  });
}

export const statusCommand: Command = createStatusCommand();
