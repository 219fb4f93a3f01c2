import {
  ATTENTION_TITLES,
  type AttentionTiming,
  formatAge,
  heartbeatFacts,
} from '../machines/attention.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { queueReaders } from '../machines/queueReaders.ts';
import { type AttentionList, loadAttention } from '../persistence/loadAttention.ts';
import type { Executor } from '../persistence/openDatabase.ts';
import { loadConfiguration, natsCredentialsOf } from '../runtime/Configuration.ts';
import { resolveRuntimeTiming } from '../runtime/Runtime.ts';
import { createJetStreamTransport } from '../transport/jetstream/createJetStreamTransport.ts';
import { inboxPrefixOf } from '../transport/jetstream/inboxPrefix.ts';
import { redactServers } from '../transport/jetstream/natsCredentials.ts';
import type { Heartbeats, WorkerHeartbeat } from '../transport/Transport.ts';
import type { Io } from './Command.ts';

/** What the attention rules need besides the database: timers, and heartbeats if visible. */
export interface AttentionSource {
  readonly timing: AttentionTiming;
  /** Null when heartbeats are not visible from here (no `NATS_URL`: an in-process transport). */
  readonly heartbeats: Heartbeats | null;
  /** Why heartbeats are not visible although `NATS_URL` is set (the broker is unreachable). */
  readonly warning?: string;
  close(): Promise<void>;
}

/**
 * The attention source of a CLI process, from the one configuration (see `opstate config`): the
 * timers of `OPSTATE_TIMING` (as the control plane reads them) and, when `NATS_URL` is set, the
 * heartbeat bucket of `OPSTATE_PREFIX`, read as an observer (nothing is created: a missing bucket
 * is said, not made) with the configuration's NATS credentials and TLS (deploy/nats.conf's
 * `observer` user).
 *
 * @example
 * ```ts
 * const source = await attentionSourceFromEnv();
 * try { … } finally { await source.close(); }
 * ```
 */
export async function attentionSourceFromEnv(
  flags: { insecureNats?: boolean } = {},
): Promise<AttentionSource> {
  const config = loadConfiguration(process.env, flags);
  const timing = resolveRuntimeTiming(config.timing, config.deadlines);
  const servers = config.nats.url;
  if (servers === undefined) {
    return { timing, heartbeats: null, close: async () => {} };
  }
  try {
    const transport = await createJetStreamTransport({
      servers,
      prefix: config.prefix,
      timing,
      credentials: natsCredentialsOf(config),
      insecureNats: config.nats.insecure,
      inboxPrefix: inboxPrefixOf(config.prefix, 'observer'),
      // It reads heartbeats and creates nothing: its NATS user may do no more.
      observer: true,
    });
    return { timing, heartbeats: transport.heartbeats, close: () => transport.close() };
  } catch (err) {
    // Reading the database is still worth it: the list says it judged without heartbeats.
    const why = err instanceof Error ? err.message : String(err);
    const refused = err instanceof OpstateError && err.code === OpstateErrorCode.CONFIG;
    return {
      timing,
      heartbeats: null,
      warning: refused
        ? `heartbeats not read: ${why}`
        : `heartbeats not read: NATS at ${redactServers(servers)} is unreachable (${why})`,
      close: async () => {},
    };
  }
}

/**
 * Loads the attention list (first page of each category) the way the dashboard does, judged by
 * the heartbeats listed (`beats`; null: not visible from here).
 *
 * @example
 * ```ts
 * const beats = source.heartbeats === null ? null : await source.heartbeats.list();
 * const list = await attentionOf(database, source.timing, beats, clock.now());
 * ```
 */
export async function attentionOf(
  database: Executor,
  timing: AttentionTiming,
  beats: readonly WorkerHeartbeat[] | null,
  now: number,
): Promise<AttentionList> {
  return loadAttention(database, {
    now,
    timing,
    heartbeats: beats === null ? null : heartbeatFacts(beats),
    readers: beats === null ? null : queueReaders(beats, now, timing.heartbeatTimeoutMs),
  });
}

/** Prints the attention list as text: each category, then one line per item. */
export function printAttention(list: AttentionList, io: Io, now: number): void {
  const total = list.sections.reduce((n, s) => n + s.total, 0);
  io.out(
    `attention (${total}${list.sections.some((s) => s.totalCapped) ? '+' : ''})${total === 0 ? ': nothing needs an operator' : ''}`,
  );
  if (!list.heartbeatsVisible) {
    io.out(
      '  (heartbeats not visible here: SCHEDULED and IN_PROGRESS are judged by the reconciler floor alone)',
    );
  }
  for (const section of list.sections) {
    if (section.total === 0) continue;
    const more =
      section.total > section.items.length ? `, first ${section.items.length} shown` : '';
    io.out(
      `  ${ATTENTION_TITLES[section.category]} (${section.total}${section.totalCapped ? '+' : ''}${more})`,
    );
    for (const item of section.items) {
      const age = formatAge(now - Date.parse(item.since));
      io.out(
        `    ${item.subject.id}  ${item.kind ?? item.subject.type}  ${item.state}  ${age}: ${item.why}`,
      );
    }
  }
}
