import type { Clock } from '../machines/Clock.ts';
import type { Pipeline } from '../machines/pipeline.ts';
import type { Logger } from '../observe/Logger.ts';
import type { RuntimeObserver } from '../observe/RuntimeObserver.ts';
import type { DatabaseTls } from '../persistence/databaseTls.ts';
import type { EmbeddedEngine, PgliteSettings } from '../persistence/publicRecords.ts';
import type { NatsCredentials } from '../transport/jetstream/natsCredentials.ts';
import type { DeadlineOverrides, RuntimeTimers } from './RuntimeTiming.ts';

/** What start is waiting for: a server, with the last error, or nothing once it has them all. */
export type StartupWait = { readonly what: string; readonly error: string } | undefined;

/** How `createRuntime` opens a deployment; every setting left out comes from the environment. */
export interface RuntimeOptions {
  /** Postgres URL; default `DATABASE_URL`, else an embedded database in `dataDir`. */
  readonly databaseUrl?: string;
  /** The embedded database's folder when no URL (default `OPSTATE_DATA_DIR`, else `./.opstate`). */
  readonly dataDir?: string;
  /** NATS URL; default `NATS_URL`, else the in-process transport (one process). */
  readonly natsUrl?: string;
  /** NATS credentials (user and password, token, NKey or `.creds`) and TLS. */
  readonly natsCredentials?: NatsCredentials;
  /**
   * Run on a NATS server that accepts clients without credentials (a development server such as
   * `nats-server -js` with no configuration), logging one WARNING. Without it (default
   * `OPSTATE_NATS_INSECURE`, else false) such a server is refused at start with `CONFIG`: anyone
   * who reaches it could forge heartbeats and dispatches (docs/trust-boundary.md).
   */
  readonly insecureNats?: boolean;
  /**
   * The prefix of the NATS connection's reply subjects [`_INBOX`]. The CLI's processes take one
   * per role (`_INBOX_<prefix>_worker_<id>`, …) so the server can let each read its own replies
   * only; an embedding process whose NATS user may subscribe to its own inbox only gives it here.
   */
  readonly natsInboxPrefix?: string;
  /** TLS to Postgres. */
  readonly databaseTls?: DatabaseTls;
  /** The embedded database without a URL: a private Postgres server (default) or PGlite. */
  readonly embeddedEngine?: EmbeddedEngine;
  /**
   * The Postgres schema of opstate's tables, functions and migration record, apart from the
   * application's (default `OPSTATE_DB_SCHEMA`, else `opstate`).
   */
  readonly databaseSchema?: string;
  /** Settings of embedded PGlite. */
  readonly pglite?: PgliteSettings;
  /** Names the deployment on NATS (stream, subjects, consumers, bucket) and the leader lock. */
  readonly prefix?: string;
  /** Timer overrides; default `OPSTATE_TIMING` (given here, the variable is not read). */
  readonly timing?: Partial<RuntimeTimers>;
  /**
   * How long one attempt of a kind may stay IN_PROGRESS from its START (ms), for the kinds named;
   * the others keep their defaults (`DEFAULT_DEADLINES_MS`). Default `OPSTATE_DEADLINES` (given
   * here, the variable is not read). Past it the worker aborts the handler and the control plane
   * resets the attempt by `deadline`. An operation may carry its own (`deadlineMs` at submit).
   */
  readonly deadlines?: DeadlineOverrides;
  /**
   * Who `submit` records as the submitter when a call gives no `by` (default
   * `OPSTATE_SERVICE_NAME`, else the `name` in the working directory's package.json, else
   * `service`): 1 to 64 characters of letters, digits and `. _ : @ / -`.
   */
  readonly serviceName?: string;
  /** Returns to PENDING an operation may take before it FAILS, unless it says (default 3). */
  readonly maxRetries?: number;
  /** Default: JSON lines on stderr (pino) at `OPSTATE_LOG_LEVEL`, the configuration's secrets kept out. */
  readonly logger?: Logger;
  /** Told of every committed transition (metrics); logging of transitions is built in. */
  readonly observer?: RuntimeObserver;
  /**
   * The one clock every timer of the runtime reads and waits through (default the system's); a
   * test passes `createSimulatedClock()` from `opstate/testing` and moves time itself.
   */
  readonly clock?: Clock;
  /**
   * A declared pipeline (`definePipeline`, `defaultPipeline`) the control plane this runtime
   * starts runs while it leads: each completed stage creates the next (docs/pipeline.md). Its
   * location names are resolved to registered locations by the leader's first pass.
   */
  readonly pipeline?: Pipeline;
  /** Apply migrations on open (default true). */
  readonly migrate?: boolean;
  /**
   * Create or update the dispatch stream and its consumers on open (default true). A worker
   * with least-privilege NATS credentials passes false: the control plane creates them.
   */
  readonly ensureTransport?: boolean;
  /**
   * Observe NATS only (default false): read heartbeats and create, change, publish or consume
   * nothing there, as the dashboard does under its read-only NATS user (deploy/nats.conf). The
   * stream and the bucket are not ensured (`ensureTransport` defaults to false); a heartbeat
   * bucket that does not exist yet is a `TRANSPORT` error saying a control plane creates it, and
   * starting a worker or a control plane on such a runtime fails with `CONFIG`.
   */
  readonly natsObserver?: boolean;
  /**
   * Run embedded whatever the environment says: the embedded database in `dataDir` and the in-process transport,
   * ignoring `DATABASE_URL` and `NATS_URL` (the demo, tests of the embedded mode).
   */
  readonly embedded?: boolean;
  /**
   * Start even while Postgres or NATS is unreachable: wait for them, retrying with capped backoff
   * and saying so in the log, instead of failing (what `opstate control-plane` and `opstate
   * worker` do). A configuration error still fails at once. Default false.
   */
  readonly waitForServers?: boolean;
  /**
   * Told, while `waitForServers` waits, what for (`Postgres`, `NATS`, `NATS JetStream`) and the
   * last error; then `undefined` once the servers are open (a readiness probe served from the
   * start, as `opstate worker --metrics-port` does).
   */
  readonly onWaiting?: (waiting: StartupWait) => void;
  /**
   * Where settings the options leave unset come from (default `process.env`): `DATABASE_URL`,
   * `NATS_URL`, `OPSTATE_*`, read and validated as the CLI reads them (`loadConfiguration`).
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
}
