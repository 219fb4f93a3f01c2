import { sql } from 'drizzle-orm';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { isNamedActor, isOperatorActor, OPERATOR, WORKER } from '../machines/actors.ts';
import { systemClock } from '../machines/Clock.ts';
import { CIRCUIT_STATES } from '../machines/circuitBreaker.ts';
import { OPERATION_KINDS } from '../machines/OperationKind.ts';
import { OPERATION_STATUSES } from '../machines/operationMachine.ts';
import { isRecoveryPath } from '../machines/recoveryPaths.ts';
import { buildInfo } from '../observe/buildInfo.ts';
import type { Logger } from '../observe/Logger.ts';
import type { RuntimeObserver } from '../observe/RuntimeObserver.ts';
import { CircuitBreakerRepository } from '../persistence/CircuitBreakerRepository.ts';
import type { Worker } from '../worker/Worker.ts';
import type { ControlPlane, Runtime } from './Runtime.ts';

/**
 * Who a transition names, as a label: a worker's id (or an operator's name) would make one
 * series per worker (or person).
 */
const actorLabel = (by: string) =>
  isNamedActor(by) ? by : isOperatorActor(by) ? OPERATOR : WORKER;

/** How `createMetrics` builds its registry. */
export interface MetricsOptions {
  /**
   * Node's default metrics (prom-client's `process_*` and `nodejs_*`, under their standard names)
   * on this registry; default true. They describe the process, not opstate, so a process has one
   * set: an application that serves opstate's registry beside its own (`Registry.merge`) and
   * already collects them there passes false, or the merge refuses the duplicate names.
   *
   * @example
   * ```ts
   * collectDefaultMetrics({ register: appRegistry });
   * const metrics = createMetrics(logger, { defaultMetrics: false });
   * const served = Registry.merge([appRegistry, metrics.registry]);
   * ```
   */
  readonly defaultMetrics?: boolean;
}

/** The Prometheus metrics of one opstate process. */
export interface Metrics {
  readonly registry: Registry;
  /** Feeds the transition, recovery, latency and duration metrics (pass it to the runtime). */
  readonly observer: RuntimeObserver;
  /** Scrape-time gauges from the database and the heartbeat store: operations, dispatches past the relay, heartbeats, breakers. */
  watchDeployment(runtime: Runtime): void;
  /** Leadership of this control plane. */
  watchControlPlane(plane: ControlPlane): void;
  /** In-flight operations of this worker. */
  watchWorker(worker: Worker): void;
}

/**
 * Creates the metrics of a process on its own registry, never prom-client's global one:
 * `opstate_build_info`, transitions by kind × event × actor, recoveries by path, dispatch → start
 * latency and handler duration by kind (from the store's observer), and at scrape time operations
 * by kind × status, outbox depth, heartbeat age, breaker state (one series per state), leadership
 * and in-flight operations per worker; and Node's default metrics under their standard names
 * unless `defaultMetrics` is false.
 *
 * @example
 * ```ts
 * const metrics = createMetrics(logger);
 * const runtime = await createRuntime({ observer: metrics.observer });
 * metrics.watchDeployment(runtime);
 * metrics.watchControlPlane(runtime.startControlPlane());
 * ```
 */
export function createMetrics(logger?: Logger, options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const build = buildInfo();
  new Gauge({
    name: 'opstate_build_info',
    help: 'Always 1; its labels say which opstate, Node and xstate versions this process runs',
    labelNames: ['version', 'node', 'xstate'] as const,
    registers,
  }).set({ version: build.version, node: build.node, xstate: build.xstate }, 1);
  /** A scrape-time reading that fails is logged and leaves the gauge empty, never the scrape. */
  const guarded: Guarded = (name, read) => async () => {
    try {
      await read();
    } catch (err) {
      logger?.log('WARNING', `metrics: cannot read ${name}`, { err });
    }
  };
  return {
    registry,
    observer: transitionMetrics(registers),
    watchDeployment: (runtime) => deploymentGauges(registers, runtime, guarded),
    watchControlPlane(plane) {
      const leader = new Gauge({
        name: 'opstate_leader',
        help: '1 while this control plane leads (runs the scheduler, relay, monitor, reconciler)',
        registers,
        collect(): void {
          leader.set(plane.isLeader ? 1 : 0);
        },
      });
    },
    watchWorker(worker) {
      const inFlight = new Gauge({
        name: 'opstate_in_flight',
        help: 'Operations this worker is running now',
        labelNames: ['worker'] as const,
        registers,
        collect(): void {
          inFlight.set({ worker: worker.id }, worker.registry.getSnapshot().context.leases.size);
        },
      });
    },
  };
}

type Guarded = (name: string, read: () => Promise<void>) => () => Promise<void>;

/** Transitions, recoveries, dispatch → start latency and handler duration, fed by the store. */
function transitionMetrics(registers: Registry[]): RuntimeObserver {
  const transitions = new Counter({
    name: 'opstate_transitions_total',
    help: 'Lifecycle transitions committed by this process, by kind, event and who caused them',
    labelNames: ['kind', 'event', 'by'] as const,
    registers,
  });
  const recoveries = new Counter({
    name: 'opstate_recoveries_total',
    help: 'Operations returned to PENDING (or FAILED at the retry cap) by a recovery path',
    labelNames: ['kind', 'path'] as const,
    registers,
  });
  const dispatchToStart = new Histogram({
    name: 'opstate_dispatch_to_start_seconds',
    help: 'From SCHEDULED (dispatch) to IN_PROGRESS (a worker started it), by kind',
    labelNames: ['kind'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers,
  });
  const handlerDuration = new Histogram({
    name: 'opstate_handler_duration_seconds',
    help: 'From START to COMPLETE or FAIL in this worker, by kind and outcome',
    labelNames: ['kind', 'outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
    registers,
  });
  const started = new Map<string, number>();
  return {
    transitions(items) {
      for (const t of items) {
        transitions.inc({ kind: t.kind, event: t.event, by: actorLabel(t.by) });
        if (t.event === 'RESET' && isRecoveryPath(t.by)) {
          recoveries.inc({ kind: t.kind, path: t.by });
        }
        if (t.event === 'START') {
          started.set(t.operationId, t.at);
          if (t.scheduledAt !== undefined) {
            dispatchToStart.observe({ kind: t.kind }, Math.max(0, t.at - t.scheduledAt) / 1000);
          }
        } else if (t.from === 'IN_PROGRESS') {
          const since = started.get(t.operationId);
          started.delete(t.operationId);
          if (since !== undefined && (t.event === 'COMPLETE' || t.event === 'FAIL')) {
            handlerDuration.observe(
              { kind: t.kind, outcome: t.event === 'COMPLETE' ? 'completed' : 'failed' },
              Math.max(0, t.at - since) / 1000,
            );
          }
        }
      }
    },
  };
}

/** Scrape-time gauges of a deployment: operations, outbox depth, heartbeat age, breakers. */
function deploymentGauges(registers: Registry[], runtime: Runtime, guarded: Guarded): void {
  const operations = new Gauge({
    name: 'opstate_operations',
    help: 'Operations stored, by kind and status',
    labelNames: ['kind', 'status'] as const,
    registers,
    collect: guarded('operation counts', async () => {
      const counts = await runtime.store.countByKindAndStatus();
      for (const kind of OPERATION_KINDS) {
        for (const status of OPERATION_STATUSES) {
          operations.set({ kind, status }, counts[kind][status]);
        }
      }
    }),
  });
  const outbox = new Gauge({
    name: 'opstate_outbox_depth',
    help: "Dispatches committed past the dispatch relay's cursor: those the scheduler has just published and those left to the relay. It lags by the relay's grace (1 s by default) and stays high only while dispatches cannot be published",
    registers,
    collect: guarded('outbox depth', async () => {
      const [row] = await runtime.database.execute<{ n: number }>(sql`
        select count(*)::int as n from operation_transition t
        where t.to_status = 'SCHEDULED'
          and t.id > coalesce((select after_id from dispatch_relay_cursor where id = 1), 0)`);
      outbox.set(Number(row?.n ?? 0));
    }),
  });
  const heartbeatAge = new Gauge({
    name: 'opstate_heartbeat_age_seconds',
    help: 'Age of the oldest heartbeat covering an operation of the kind; no series for a kind no heartbeat covers',
    labelNames: ['kind'] as const,
    registers,
    collect: guarded('heartbeats', async () => {
      heartbeatAge.reset();
      // Heartbeats are stamped by their store: judged by real time.
      const now = systemClock.now();
      const oldest = new Map<string, number>();
      for (const h of await runtime.transport.heartbeats.list()) {
        const age = Math.max(0, now - h.at) / 1000;
        for (const held of h.held) {
          oldest.set(held.kind, Math.max(oldest.get(held.kind) ?? 0, age));
        }
      }
      for (const [kind, age] of oldest) heartbeatAge.set({ kind }, age);
    }),
  });
  const breakers = new Gauge({
    name: 'opstate_breaker_state',
    help: 'Circuit breakers by kind and location: 1 for the state each is in, 0 for the others (a pair that never failed has no row and is CLOSED)',
    labelNames: ['kind', 'location', 'state'] as const,
    registers,
    collect: guarded('circuit breakers', async () => {
      breakers.reset();
      for (const b of await new CircuitBreakerRepository(runtime.database).list()) {
        for (const state of CIRCUIT_STATES) {
          breakers.set({ kind: b.kind, location: b.location, state }, b.state === state ? 1 : 0);
        }
      }
    }),
  });
}
