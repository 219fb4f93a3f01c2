/** How often each control-plane loop runs when idle, and how much it takes per pass. */
export interface ControlPlaneTiming {
  /** How often the scheduler claims due PENDING operations and publishes them [250 ms]. */
  readonly schedulerIntervalMs: number;
  /**
   * How often the dispatch relay publishes dispatches the scheduler left unpublished (read from
   * the SCHEDULE transitions past its cursor), those older than four of its intervals (at least
   * 1 s) [250 ms].
   */
  readonly relayIntervalMs: number;
  /**
   * How often the heartbeat monitor looks for work held only by stale heartbeats [10 s, at most
   * the heartbeat interval].
   */
  readonly monitorIntervalMs: number;
  /**
   * How often the reconciler looks for work past its floor held by no live worker [60 s, at most
   * a quarter of the floor].
   */
  readonly reconcilerIntervalMs: number;
  /**
   * Most operations one scheduler pass claims and one relay pass reads past its cursor [256];
   * the circuit breakers read four times as many transitions a pass.
   */
  readonly batchSize: number;
  /**
   * Most operations SCHEDULED (handed to the broker, not yet started) at once. The rest wait as
   * PENDING: a backlog lives in the database, not in the queue, so a dispatch is picked up soon
   * after it is made and the reconciler floor never mistakes a queued dispatch for a lost one.
   */
  readonly maxScheduled: number;
  /**
   * How long a due operation may wait before the scheduler claims it as if at the highest
   * priority, whatever its own, so that a stream of higher-priority work never starves it [15 min].
   */
  readonly starvationAgeMs: number;
  /** How often the circuit breakers per (kind, target location) read new outcomes [1 s]. */
  readonly breakerIntervalMs: number;
  /** Consecutive failures of a (kind, target location) that open its breaker [5]. */
  readonly breakerThreshold: number;
  /** How long an open breaker parks its PENDING work before one probe goes through [60 s]. */
  readonly breakerCooldownMs: number;
  /**
   * How often the leader folds the rows the counts per kind × status are summed from. Each write
   * statement adds a few; at thousands of operations a second a pass folds a few thousand rows.
   */
  readonly countFoldIntervalMs: number;
  /**
   * How often the leader makes partitions of the transition history ahead of its ids and drops
   * those its retention policy lets go (`opstate retention`) [60 s].
   */
  readonly historyIntervalMs: number;
  /**
   * How often the leader creates the consumers of newly registered locations' site queues (it
   * also does so at once when it dispatches to a queue it has not created), and workers look for
   * locations registered since, to read their queues: one read of the registered locations per
   * look [5 s].
   */
  readonly discoveryIntervalMs: number;
}
