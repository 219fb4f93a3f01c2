import { z } from 'zod';
import { operatorNameProblem } from '../machines/actors.ts';
import { DEADLINE_ALLOWED, deadlineProblem, MAX_DEADLINE_MS } from '../machines/deadlines.ts';
import { describeValue } from '../machines/describeValue.ts';
import { DURATION_FORMS, durationMs } from '../machines/durationMs.ts';
import { isOperationKind, OPERATION_KINDS } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { isSystemActor, SUBMITTER_ALLOWED, submitterProblem } from '../machines/submitter.ts';
import { LOG_LEVELS, type LogLevelName } from '../observe/pinoLogger.ts';
import {
  DATABASE_SCHEMA_ALLOWED,
  DEFAULT_DATABASE_SCHEMA,
  databaseSchemaProblem,
} from '../persistence/databaseSchema.ts';
import type { DatabaseTls } from '../persistence/databaseTls.ts';
import type { EmbeddedEngine, OpenDatabaseOptions } from '../persistence/openDatabase.ts';
import {
  type NatsAuth,
  type NatsCredentials,
  redactUrl,
  redactUrlList,
  type TlsFiles,
  userInfoOf,
} from '../transport/jetstream/natsCredentials.ts';
import type { DeadlineOverrides, RuntimeTimers } from './RuntimeTiming.ts';

export { LOG_LEVELS, type LogLevelName };

/** Every setting of an opstate process, resolved from the environment and flags in one place. */
export interface Configuration {
  readonly database: {
    /** Postgres; absent: embedded in `dataDir`. */
    readonly url?: string;
    readonly dataDir: string;
    /**
     * The embedded database without a URL: `postgres` (a private server) or `pglite`; absent: a
     * private server, unless the folder already holds PGlite.
     */
    readonly engine?: EmbeddedEngine;
    /** The Postgres schema of opstate's tables and migration record (default `opstate`). */
    readonly schema: string;
    /** `disable` (the URL decides), `require` (encrypted), `verify-full` (encrypted, verified). */
    readonly tls: 'disable' | 'require' | 'verify-full';
    readonly tlsFiles: TlsFiles;
  };
  readonly nats: {
    /** NATS servers, comma-separated; absent: the in-process transport. */
    readonly url?: string;
    readonly auth: NatsAuth;
    /** TLS to NATS: on when any file is named or the URL is `tls://`. */
    readonly tls?: TlsFiles;
    /** Most bytes the dispatch stream stores; absent: the transport's default (256 MiB). */
    readonly dispatchMaxBytes?: number;
    /**
     * Most dispatches one queue hands out unsettled, across every worker (its consumer's
     * `max_ack_pending`); a running operation stays unsettled, so it caps what runs at once per
     * queue. Absent: the transport's default (1,000).
     */
    readonly queueMaxInFlight?: number;
    /** Copies of the dispatch stream and heartbeat bucket; absent: 3 on a cluster of three or more, else 1. */
    readonly replicas?: number;
    /** Run on a NATS that accepts clients without credentials (development only). */
    readonly insecure: boolean;
  };
  readonly prefix: string;
  readonly timing: Partial<RuntimeTimers>;
  /** Deadlines per attempt by kind (ms), over the defaults; `{}`: the defaults. */
  readonly deadlines: DeadlineOverrides;
  readonly logLevel: LogLevelName;
  /** Port of `/metrics`, `/healthz` and `/readyz`; absent: not served. */
  readonly metricsPort?: number;
  /** The address the metrics server listens on (default 127.0.0.1). */
  readonly metricsHost: string;
  /**
   * Who a runtime's `submit` records as the submitter when the call names none; absent: the
   * `name` in the working directory's package.json, else `service`.
   */
  readonly serviceName?: string;
}

/** What flags may set, overriding the environment. */
export interface ConfigurationFlags {
  readonly metricsPort?: string;
  readonly metricsHost?: string;
  /** `--insecure-nats`: as `OPSTATE_NATS_INSECURE=1`. */
  readonly insecureNats?: boolean;
}

/**
 * Settings given in code (`createRuntime`'s options of the same names): each wins over its
 * variable, which is then not read, and is held to the same rules.
 */
export interface ConfigurationOverrides {
  readonly databaseUrl?: string;
  readonly dataDir?: string;
  readonly embeddedEngine?: EmbeddedEngine;
  readonly databaseSchema?: string;
  readonly databaseTls?: DatabaseTls;
  readonly natsUrl?: string;
  readonly natsCredentials?: NatsCredentials;
  /** Run on a NATS that accepts clients without credentials; wins over `OPSTATE_NATS_INSECURE`. */
  readonly insecureNats?: boolean;
  readonly prefix?: string;
  readonly timing?: Partial<RuntimeTimers>;
  /** Deadlines per attempt by kind (ms), as `OPSTATE_DEADLINES` gives them. */
  readonly deadlines?: DeadlineOverrides;
  readonly serviceName?: string;
  /** The embedded database and the in-process transport: `DATABASE_URL` and `NATS_URL` are not read. */
  readonly embedded?: boolean;
}

/** The option that overrides each variable, for messages. */
const OPTION_OF: Record<string, keyof ConfigurationOverrides> = {
  DATABASE_URL: 'databaseUrl',
  OPSTATE_DATA_DIR: 'dataDir',
  OPSTATE_EMBEDDED_ENGINE: 'embeddedEngine',
  OPSTATE_DB_SCHEMA: 'databaseSchema',
  NATS_URL: 'natsUrl',
  OPSTATE_PREFIX: 'prefix',
  OPSTATE_SERVICE_NAME: 'serviceName',
};

/** One environment variable: what it sets, what it allows, and whether it is a secret. */
export interface Setting {
  readonly variable: string;
  readonly allowed: string;
  readonly secret: boolean;
  readonly flag?: string;
}

/** The variables opstate reads, in the order `opstate config` shows them. */
export const SETTINGS: readonly Setting[] = [
  { variable: 'DATABASE_URL', allowed: 'postgres://user:password@host:port/db', secret: false },
  { variable: 'OPSTATE_DATA_DIR', allowed: 'a folder (default ./.opstate)', secret: false },
  {
    variable: 'OPSTATE_EMBEDDED_ENGINE',
    allowed: 'postgres | pglite (default postgres)',
    secret: false,
  },
  { variable: 'OPSTATE_DB_SCHEMA', allowed: DATABASE_SCHEMA_ALLOWED, secret: false },
  {
    variable: 'OPSTATE_DATABASE_TLS',
    allowed: 'disable | require | verify-full (default disable)',
    secret: false,
  },
  { variable: 'OPSTATE_DATABASE_CA_FILE', allowed: 'a PEM file', secret: false },
  { variable: 'OPSTATE_DATABASE_CERT_FILE', allowed: 'a PEM file', secret: false },
  { variable: 'OPSTATE_DATABASE_KEY_FILE', allowed: 'a PEM file', secret: false },
  {
    variable: 'NATS_URL',
    allowed: 'nats://host:port or tls://host:port, comma-separated',
    secret: false,
  },
  {
    variable: 'OPSTATE_NATS_USER',
    allowed: 'a user name (with OPSTATE_NATS_PASSWORD)',
    secret: false,
  },
  { variable: 'OPSTATE_NATS_PASSWORD', allowed: 'the password of OPSTATE_NATS_USER', secret: true },
  { variable: 'OPSTATE_NATS_TOKEN', allowed: 'an authorization token', secret: true },
  {
    variable: 'OPSTATE_NATS_NKEY_SEED_FILE',
    allowed: 'a file holding an NKey user seed (SU…)',
    secret: false,
  },
  { variable: 'OPSTATE_NATS_CREDS_FILE', allowed: 'a .creds file (JWT and seed)', secret: false },
  { variable: 'OPSTATE_NATS_CA_FILE', allowed: 'a PEM file', secret: false },
  { variable: 'OPSTATE_NATS_CERT_FILE', allowed: 'a PEM file', secret: false },
  { variable: 'OPSTATE_NATS_KEY_FILE', allowed: 'a PEM file', secret: false },
  {
    variable: 'OPSTATE_NATS_INSECURE',
    allowed:
      '1 or true to run on a NATS that accepts clients without credentials, for development only (without it such a server is refused); 0, false or unset not to',
    secret: false,
    flag: '--insecure-nats',
  },
  {
    variable: 'OPSTATE_ARCHIVE_KEY_FILE',
    allowed: 'a file holding the archive encryption key (archives are encrypted at rest)',
    secret: false,
  },
  {
    variable: 'OPSTATE_ARCHIVE_READ_KEY_FILES',
    allowed:
      'comma-separated files holding older archive keys: they open what they sealed, never seal (with OPSTATE_ARCHIVE_KEY_FILE)',
    secret: false,
  },
  {
    variable: 'OPSTATE_PREFIX',
    allowed: "letters, digits, '-' and '_' (default opstate)",
    secret: false,
  },
  {
    variable: 'OPSTATE_DISPATCH_MAX_BYTES',
    allowed: 'a whole number of bytes, at least 1048576 (default 268435456: 256 MiB)',
    secret: false,
  },
  {
    variable: 'OPSTATE_QUEUE_MAX_IN_FLIGHT',
    allowed:
      "dispatches one queue may have handed out and not yet settled, across every worker (its consumer's max_ack_pending): a running operation stays unsettled, so at most this many run at once per queue; 1 to 1000000 (default 1000)",
    secret: false,
  },
  {
    variable: 'OPSTATE_NATS_REPLICAS',
    allowed:
      'copies of the dispatch stream and heartbeat bucket, 1 to 5 (default 3 on a NATS cluster that advertises three or more servers, else 1)',
    secret: false,
  },
  {
    variable: 'OPSTATE_TIMING',
    allowed: 'a JSON object of timer names to milliseconds',
    secret: false,
  },
  {
    variable: 'OPSTATE_DEADLINES',
    allowed: `a JSON object of operation kinds to how long one attempt may run, such as {"long_term_archive":"6h","transfer":"2h"}, each a duration (${DURATION_FORMS}) or a number of milliseconds, at most 7d (default: 6h, a transfer 12h, a long-term archive and staging 24h)`,
    secret: false,
  },
  {
    variable: 'OPSTATE_SERVICE_NAME',
    allowed: `${SUBMITTER_ALLOWED} (default: the package.json name, else service)`,
    secret: false,
  },
  {
    variable: 'OPSTATE_LOG_LEVEL',
    allowed: `${LOG_LEVELS.join(' | ')} (default info)`,
    secret: false,
  },
  {
    variable: 'OPSTATE_METRICS_PORT',
    allowed: 'a TCP port 0–65535 (0: any free port)',
    secret: false,
    flag: '--metrics-port',
  },
  {
    variable: 'OPSTATE_METRICS_HOST',
    allowed:
      'an IP address or host name for the metrics server to listen on (default 127.0.0.1; 0.0.0.0: every interface)',
    secret: false,
    flag: '--metrics-host',
  },
  {
    variable: 'OPSTATE_OPERATOR',
    allowed:
      "who operator commands are recorded as by: 1 to 64 characters of letters, digits and . _ @ - (default: the user running the CLI; the dashboard: its token's name, else operator)",
    secret: false,
    flag: '--operator',
  },
  {
    variable: 'OPSTATE_DASHBOARD_ALLOWED_HOSTS',
    allowed:
      'host names the dashboard answers to besides localhost, 127.0.0.1, [::1] and its --host, comma-separated (a request naming another Host is refused)',
    secret: false,
    flag: '--allowed-host',
  },
  {
    variable: 'OPSTATE_DASHBOARD_TOKEN',
    allowed:
      "the dashboard's tokens, comma-separated, each name:secret (the name is recorded as the operator) or a secret, at least 16 characters (required with --allow-actions off loopback; made and printed once when not set)",
    secret: true,
  },
];

const nonEmpty = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

const port = z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(0).max(65_535));

const timing = z
  .string()
  .transform((raw, ctx) => {
    try {
      return JSON.parse(raw) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'is not JSON' });
      return z.NEVER;
    }
  })
  .pipe(z.record(z.string(), z.number().int().positive()));

/**
 * What is wrong with one kind's deadline as given (a duration or a number of ms), else its ms.
 * Messages name the kind, so that one of several is found at once.
 */
function deadlineOfEntry(kind: string, value: unknown): { ms: number } | { problem: string } {
  if (!isOperationKind(kind)) {
    return { problem: `unknown kind '${kind}'; use one of ${OPERATION_KINDS.join(', ')}` };
  }
  const ms = typeof value === 'string' ? durationMs(value, 'ms') : value;
  if (ms === undefined) {
    return { problem: `the deadline of ${kind} is ${describeValue(value)}, not a duration` };
  }
  const problem = deadlineProblem(ms);
  if (problem === undefined) return { ms: ms as number };
  return {
    problem:
      typeof ms === 'number' && ms > MAX_DEADLINE_MS
        ? `the deadline of ${kind} is longer than 7 days`
        : `the deadline of ${kind} ${problem}`,
  };
}

const deadlines = z.string().transform((raw, ctx) => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw) as unknown;
  } catch {
    ctx.addIssue({ code: 'custom', message: 'is not JSON' });
    return z.NEVER;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    ctx.addIssue({ code: 'custom', message: 'is not an object of kinds to durations' });
    return z.NEVER;
  }
  const out: Record<string, number> = {};
  for (const [kind, value] of Object.entries(parsed)) {
    const entry = deadlineOfEntry(kind, value);
    if ('problem' in entry) ctx.addIssue({ code: 'custom', message: entry.problem });
    else out[kind] = entry.ms;
  }
  return out as DeadlineOverrides;
});

/** The `deadlines` option, held to the rules of `OPSTATE_DEADLINES` (milliseconds only). */
function deadlinesOption(given: DeadlineOverrides): DeadlineOverrides {
  const problems = Object.entries(given).flatMap(([kind, ms]) => {
    if (ms === undefined) return [];
    const entry = deadlineOfEntry(kind, typeof ms === 'number' ? ms : Number.NaN);
    return 'problem' in entry ? [entry.problem] : [];
  });
  if (problems.length > 0) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `the option deadlines (as OPSTATE_DEADLINES) must give each kind ${DEADLINE_ALLOWED}; ${problems.join('; ')}`,
    );
  }
  return given;
}

const decodedOrUndefined = (text: string): string | undefined => {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
};

/**
 * Refuses URLs whose user info or path is not well percent-encoded (a client would throw on it):
 * each of a list (NATS_URL), or one URL (DATABASE_URL, whose password may hold a comma).
 */
const wellEncoded = (list: boolean) => (value: string | undefined, ctx: z.RefinementCtx) => {
  for (const url of value === undefined ? [] : list ? value.split(',') : [value]) {
    const info = userInfoOf(url.trim());
    if (info !== undefined && decodedOrUndefined(info) === undefined) {
      ctx.addIssue({
        code: 'custom',
        message:
          "its user name or password is not well percent-encoded: write '%' as %25, '@' as %40, ':' as %3A, '/' as %2F",
      });
      return;
    }
    const path = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*(\/[^?#]*)/i.exec(url.trim())?.[1];
    if (path !== undefined && decodedOrUndefined(path) === undefined) {
      ctx.addIssue({ code: 'custom', message: 'its path is not well percent-encoded' });
      return;
    }
  }
};

/**
 * Refuses a DATABASE_URL that postgres.js cannot read, as it reads one (it would throw a URIError
 * or TypeError from its constructor): it takes the hosts after the first `@` before any `/` or
 * `?`, percent-decodes them, and parses the URL with the first host alone.
 */
const clientReadable = (value: string | undefined, ctx: z.RefinementCtx) => {
  if (value === undefined) return;
  const authority = value.slice(value.indexOf('://') + 3).split(/[?/]/)[0] as string;
  const hosts = decodedOrUndefined(authority.slice(authority.indexOf('@') + 1));
  if (hosts === undefined) {
    ctx.addIssue({ code: 'custom', message: 'its host is not well percent-encoded' });
  } else if (!URL.canParse(value.replace(hosts, hosts.split(',')[0] as string))) {
    ctx.addIssue({
      code: 'custom',
      message:
        'it is not a URL a client can read: check the brackets around an IPv6 host, the port and any stray character',
    });
  }
};

/** Each variable's schema: a failure names the variable and what it allows. */
const schemas: Record<string, z.ZodType> = {
  DATABASE_URL: nonEmpty
    .pipe(
      z
        .string()
        .regex(/^postgres(ql)?:\/\/./)
        .optional(),
    )
    .superRefine(wellEncoded(false))
    .superRefine(clientReadable),
  OPSTATE_DATABASE_TLS: nonEmpty.pipe(z.enum(['disable', 'require', 'verify-full']).optional()),
  OPSTATE_EMBEDDED_ENGINE: nonEmpty.pipe(z.enum(['postgres', 'pglite']).optional()),
  OPSTATE_DB_SCHEMA: nonEmpty.superRefine((name, ctx) => {
    const problem = name === undefined ? undefined : databaseSchemaProblem(name);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `it ${problem}` });
  }),
  NATS_URL: nonEmpty
    .pipe(
      z
        .string()
        .regex(/^((nats|tls):\/\/[^,\s]+)(,(nats|tls):\/\/[^,\s]+)*$/)
        .optional(),
    )
    .superRefine(wellEncoded(true)),
  OPSTATE_PREFIX: nonEmpty.pipe(
    z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/)
      .optional(),
  ),
  OPSTATE_QUEUE_MAX_IN_FLIGHT: nonEmpty.pipe(
    z
      .string()
      .regex(/^\d+$/)
      .transform(Number)
      .pipe(z.number().int().min(1).max(1_000_000))
      .optional(),
  ),
  OPSTATE_NATS_REPLICAS: nonEmpty.pipe(
    z
      .string()
      .regex(/^[1-5]$/)
      .transform(Number)
      .optional(),
  ),
  OPSTATE_DISPATCH_MAX_BYTES: nonEmpty.pipe(
    z
      .string()
      .regex(/^\d+$/)
      .transform(Number)
      .pipe(
        z
          .number()
          .int()
          .min(1024 * 1024)
          .max(Number.MAX_SAFE_INTEGER),
      )
      .optional(),
  ),
  OPSTATE_TIMING: nonEmpty.pipe(timing.optional()),
  OPSTATE_DEADLINES: nonEmpty.pipe(deadlines.optional()),
  OPSTATE_SERVICE_NAME: nonEmpty.superRefine((name, ctx) => {
    if (name === undefined || submitterProblem(name) === undefined) return;
    const odd = /[^A-Za-z0-9._:@/-]/.exec(name)?.[0];
    const message = isSystemActor(name)
      ? "it is one of opstate's own actors"
      : odd !== undefined
        ? `it contains ${JSON.stringify(odd)}`
        : `it is ${name.length} characters long`;
    ctx.addIssue({ code: 'custom', message });
  }),
  OPSTATE_LOG_LEVEL: nonEmpty.pipe(z.enum(LOG_LEVELS).optional()),
  OPSTATE_METRICS_PORT: nonEmpty.pipe(port.optional()),
  OPSTATE_METRICS_HOST: nonEmpty.pipe(
    z
      .string()
      .regex(/^(?:[A-Za-z0-9.-]+|\[?[0-9A-Fa-f:.]+\]?)$/)
      .optional(),
  ),
  OPSTATE_NATS_INSECURE: nonEmpty.pipe(
    z
      .enum(['1', '0', 'true', 'false'])
      .transform((v) => v === '1' || v === 'true')
      .optional(),
  ),
  OPSTATE_OPERATOR: nonEmpty.superRefine((name, ctx) => {
    const problem = name === undefined ? undefined : operatorNameProblem(name);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `it ${problem}` });
  }),
  OPSTATE_DASHBOARD_ALLOWED_HOSTS: nonEmpty.pipe(
    z
      .string()
      .regex(/^\s*[A-Za-z0-9.:[\]-]+\s*(,\s*[A-Za-z0-9.:[\]-]+\s*)*$/)
      .optional(),
  ),
};

type Environment = Readonly<Record<string, string | undefined>>;

/**
 * A URL variable's value as a refusal shows it: NATS_URL is a list of URLs; DATABASE_URL is one
 * URL, which may name several hosts but has one user info, whose password may hold a comma.
 */
function shownUrl(variable: string, value: string): string {
  // A refused value is redacted whole, not entry by entry: a comma in a password would split it.
  return variable.endsWith('_URL') ? redactUrl(value) : value;
}

function read(env: Environment, variable: string, value = env[variable], named?: string): unknown {
  const setting = SETTINGS.find((s) => s.variable === variable) as Setting;
  const schema = schemas[variable] ?? nonEmpty;
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const shown = setting.secret
      ? '(the value is secret)'
      : `got '${shownUrl(variable, String(value))}'`;
    // Only reasons of our own wording: the schema's (a pattern, "Invalid option") say no more
    // than `allowed` does, in terms of the validator.
    const reason = parsed.error.issues
      .filter((i) => i.code === 'custom')
      .map((i) => i.message)
      .join('; ');
    const name = named ?? (setting.flag === undefined ? variable : `${variable} / ${setting.flag}`);
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `${name} must be ${setting.allowed}; ${shown}${reason === '' ? '' : ` (${reason})`}`,
    );
  }
  return parsed.data;
}

/**
 * Resolves every setting of an opstate process from the environment, flags and options given in
 * code (a flag or an option wins over its variable), and validates it: a bad value is refused
 * with `CONFIG`, naming the variable (or option) and what it allows. `createRuntime` resolves its
 * options through it, as the CLI does its environment and flags.
 *
 * @example
 * ```ts
 * const config = loadConfiguration(process.env, { metricsPort: '9464' });
 * const mine = loadConfiguration(process.env, {}, { natsUrl: 'nats://n1:4222' });
 * ```
 */
export function loadConfiguration(
  env: Environment = process.env,
  flags: ConfigurationFlags = {},
  overrides: ConfigurationOverrides = {},
): Configuration {
  const embedded = overrides.embedded === true;
  if (embedded && (overrides.databaseUrl !== undefined || overrides.natsUrl !== undefined)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      'embedded: true runs on the embedded database and the in-process transport; drop databaseUrl and natsUrl',
    );
  }
  const get = (variable: string): string | undefined => {
    const option = OPTION_OF[variable];
    const given = option === undefined ? undefined : overrides[option];
    if (given !== undefined) {
      return read(env, variable, String(given), `the option ${option} (as ${variable})`) as
        | string
        | undefined;
    }
    if (embedded && (variable === 'DATABASE_URL' || variable === 'NATS_URL')) return undefined;
    return read(env, variable) as string | undefined;
  };
  const natsUrl = get('NATS_URL');
  const nats = natsOf(overrides.natsCredentials ?? natsCredentialsFromEnv(get), natsUrl);
  const database = databaseTlsOf(overrides.databaseTls, get);
  const metricsPort =
    flags.metricsPort === undefined
      ? (read(env, 'OPSTATE_METRICS_PORT') as number | undefined)
      : (read({ OPSTATE_METRICS_PORT: flags.metricsPort }, 'OPSTATE_METRICS_PORT') as number);
  const metricsHost = (
    flags.metricsHost === undefined
      ? read(env, 'OPSTATE_METRICS_HOST')
      : read({ OPSTATE_METRICS_HOST: flags.metricsHost }, 'OPSTATE_METRICS_HOST')
  ) as string | undefined;
  const insecure =
    overrides.insecureNats ??
    (flags.insecureNats === true
      ? true
      : (read(env, 'OPSTATE_NATS_INSECURE') as boolean | undefined));
  const databaseUrl = get('DATABASE_URL');
  const engine = get('OPSTATE_EMBEDDED_ENGINE') as EmbeddedEngine | undefined;
  const serviceName = get('OPSTATE_SERVICE_NAME');
  const dispatchMaxBytes = read(env, 'OPSTATE_DISPATCH_MAX_BYTES') as number | undefined;
  const replicas = read(env, 'OPSTATE_NATS_REPLICAS') as number | undefined;
  const queueMaxInFlight = read(env, 'OPSTATE_QUEUE_MAX_IN_FLIGHT') as number | undefined;
  return {
    database: {
      ...(databaseUrl === undefined ? {} : { url: databaseUrl }),
      dataDir: get('OPSTATE_DATA_DIR') ?? './.opstate',
      ...(engine === undefined ? {} : { engine }),
      schema: get('OPSTATE_DB_SCHEMA') ?? DEFAULT_DATABASE_SCHEMA,
      tls: database.mode,
      tlsFiles: database.files,
    },
    nats: {
      ...(natsUrl === undefined ? {} : { url: natsUrl }),
      ...nats,
      ...(dispatchMaxBytes === undefined ? {} : { dispatchMaxBytes }),
      ...(queueMaxInFlight === undefined ? {} : { queueMaxInFlight }),
      ...(replicas === undefined ? {} : { replicas }),
      insecure: insecure === true,
    },
    prefix: get('OPSTATE_PREFIX') ?? 'opstate',
    timing:
      overrides.timing ?? (read(env, 'OPSTATE_TIMING') as Partial<RuntimeTimers> | undefined) ?? {},
    deadlines:
      overrides.deadlines === undefined
        ? ((read(env, 'OPSTATE_DEADLINES') as DeadlineOverrides | undefined) ?? {})
        : deadlinesOption(overrides.deadlines),
    logLevel: (get('OPSTATE_LOG_LEVEL') ?? 'info') as LogLevelName,
    ...(metricsPort === undefined ? {} : { metricsPort }),
    metricsHost: metricsHost ?? '127.0.0.1',
    ...(serviceName === undefined ? {} : { serviceName }),
  };
}

type Get = (variable: string) => string | undefined;

/**
 * One setting of the operator's tools (`OPSTATE_OPERATOR`, `OPSTATE_DASHBOARD_ALLOWED_HOSTS`,
 * `OPSTATE_DASHBOARD_TOKEN`), its flag winning over its variable, held
 * to its rules: a bad value is refused with `CONFIG` naming both.
 *
 * @example
 * ```ts
 * const operator = readSetting(process.env, 'OPSTATE_OPERATOR', flags.operator);
 * ```
 */
export function readSetting(
  env: Environment,
  variable: 'OPSTATE_OPERATOR' | 'OPSTATE_DASHBOARD_ALLOWED_HOSTS' | 'OPSTATE_DASHBOARD_TOKEN',
  flag?: string,
): string | undefined {
  return (flag === undefined ? read(env, variable) : read({ [variable]: flag }, variable)) as
    | string
    | undefined;
}

/** The NATS credentials the environment gives: at most one way. */
function natsCredentialsFromEnv(get: Get): NatsCredentials {
  const user = get('OPSTATE_NATS_USER');
  const password = get('OPSTATE_NATS_PASSWORD');
  const token = get('OPSTATE_NATS_TOKEN');
  const seedFile = get('OPSTATE_NATS_NKEY_SEED_FILE');
  const credsFile = get('OPSTATE_NATS_CREDS_FILE');
  const ways = [
    user !== undefined || password !== undefined ? 'OPSTATE_NATS_USER/OPSTATE_NATS_PASSWORD' : '',
    token === undefined ? '' : 'OPSTATE_NATS_TOKEN',
    seedFile === undefined ? '' : 'OPSTATE_NATS_NKEY_SEED_FILE',
    credsFile === undefined ? '' : 'OPSTATE_NATS_CREDS_FILE',
  ].filter(Boolean);
  if (ways.length > 1) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `NATS credentials are given ${ways.length} ways (${ways.join(', ')}); set only one`,
    );
  }
  if ((user === undefined) !== (password === undefined)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      'OPSTATE_NATS_USER and OPSTATE_NATS_PASSWORD go together; set both or neither',
    );
  }
  const auth: NatsAuth =
    user !== undefined && password !== undefined
      ? { type: 'user', user, password }
      : token !== undefined
        ? { type: 'token', token }
        : seedFile !== undefined
          ? { type: 'nkey', seedFile }
          : credsFile !== undefined
            ? { type: 'creds', credsFile }
            : { type: 'none' };
  const tls = tlsFilesOf('NATS', get);
  return { auth, ...(Object.keys(tls).length > 0 ? { tls } : {}) };
}

/** Credentials as the configuration holds them: TLS on when a file is named or the URL is `tls://`. */
function natsOf(
  credentials: NatsCredentials,
  url: string | undefined,
): Pick<Configuration['nats'], 'auth' | 'tls'> {
  const tls =
    credentials.tls ??
    (url?.split(',').some((u) => u.trim().startsWith('tls://')) === true ? {} : undefined);
  return { auth: credentials.auth ?? { type: 'none' }, ...(tls === undefined ? {} : { tls }) };
}

function tlsFilesOf(kind: 'DATABASE' | 'NATS', get: Get): TlsFiles {
  const files = {
    caFile: get(`OPSTATE_${kind}_CA_FILE`),
    certFile: get(`OPSTATE_${kind}_CERT_FILE`),
    keyFile: get(`OPSTATE_${kind}_KEY_FILE`),
  };
  if ((files.certFile === undefined) !== (files.keyFile === undefined)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `OPSTATE_${kind}_CERT_FILE and OPSTATE_${kind}_KEY_FILE go together; set both or neither`,
    );
  }
  return Object.fromEntries(Object.entries(files).filter(([, v]) => v !== undefined));
}

/** TLS to Postgres from the option, else the environment; files need TLS on. */
function databaseTlsOf(
  given: DatabaseTls | undefined,
  get: Get,
): { mode: Configuration['database']['tls']; files: TlsFiles } {
  if (given !== undefined) {
    const { mode, ...files } = given;
    if (!['disable', 'require', 'verify-full'].includes(mode)) {
      throw new OpstateError(
        OpstateErrorCode.CONFIG,
        `the option databaseTls.mode (as OPSTATE_DATABASE_TLS) must be disable | require | verify-full; got '${mode}'`,
      );
    }
    return { mode, files };
  }
  const mode = (get('OPSTATE_DATABASE_TLS') ?? 'disable') as Configuration['database']['tls'];
  const files = tlsFilesOf('DATABASE', get);
  if (mode === 'disable' && Object.keys(files).length > 0) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      'OPSTATE_DATABASE_*_FILE is set but OPSTATE_DATABASE_TLS is disable; set it to require or verify-full',
    );
  }
  return { mode, files };
}

/**
 * The configuration with every secret replaced: passwords in URLs, the NATS password and token.
 * File paths are shown (they name where a secret is, not the secret).
 *
 * @example
 * ```ts
 * console.log(JSON.stringify(redactConfiguration(loadConfiguration())));
 * ```
 */
export function redactConfiguration(config: Configuration): Configuration {
  const auth = config.nats.auth;
  return {
    ...config,
    database: {
      ...config.database,
      ...(config.database.url === undefined ? {} : { url: redactUrl(config.database.url) }),
    },
    nats: {
      ...config.nats,
      ...(config.nats.url === undefined ? {} : { url: redactUrlList(config.nats.url) }),
      auth:
        auth.type === 'user'
          ? { ...auth, password: '***' }
          : auth.type === 'token'
            ? { ...auth, token: '***' }
            : auth,
    },
  };
}

/**
 * How to open the configured database (URL or data folder, and TLS), for `openDatabase`.
 *
 * @example
 * ```ts
 * const database = await openDatabase(databaseOptionsOf(loadConfiguration()));
 * ```
 */
export function databaseOptionsOf(config: Configuration): OpenDatabaseOptions {
  return {
    ...(config.database.url === undefined ? {} : { databaseUrl: config.database.url }),
    dataDir: config.database.dataDir,
    ...(config.database.engine === undefined ? {} : { engine: config.database.engine }),
    schema: config.database.schema,
    // Decided here: openDatabase does not read DATABASE_URL again.
    ...(config.database.url === undefined ? { embedded: true } : {}),
    tls: { mode: config.database.tls, ...config.database.tlsFiles },
  };
}

/**
 * The configured NATS credentials and TLS, for `createJetStreamTransport`.
 *
 * @example
 * ```ts
 * await createJetStreamTransport({ servers, prefix, timing, credentials: natsCredentialsOf(config) });
 * ```
 */
export function natsCredentialsOf(config: Configuration): NatsCredentials {
  return {
    auth: config.nats.auth,
    ...(config.nats.tls === undefined ? {} : { tls: config.nats.tls }),
  };
}

/**
 * Every secret of a configuration (passwords, tokens, a password in a URL), so that a logger can
 * keep each out of every line.
 *
 * @example
 * ```ts
 * createPinoLogger({ secrets: secretsOf(loadConfiguration()) });
 * ```
 */
export function secretsOf(config: Configuration): string[] {
  const secrets: string[] = [];
  const auth = config.nats.auth;
  if (auth.type === 'user') secrets.push(auth.password);
  if (auth.type === 'token') secrets.push(auth.token);
  for (const url of [config.database.url, ...(config.nats.url?.split(',') ?? [])]) {
    if (url === undefined) continue;
    // The password as a URL parser reads it, all before the last '@' (as redactUrl hides it),
    // and all before the first '@' (as postgres.js reads a user info holding a raw '@').
    const whole = url.trim().slice(url.trim().indexOf('://') + 3);
    for (const info of [
      userInfoOf(url.trim()),
      whole.slice(0, Math.max(0, whole.lastIndexOf('@'))),
      whole.slice(0, Math.max(0, whole.indexOf('@'))),
    ]) {
      const colon = info?.indexOf(':') ?? -1;
      if (info === undefined || colon === -1 || colon === info.length - 1) continue;
      const password = info.slice(colon + 1);
      const decoded = decodedOrUndefined(password);
      for (const s of [password, decoded])
        if (s !== undefined && !secrets.includes(s)) secrets.push(s);
    }
  }
  return secrets;
}
