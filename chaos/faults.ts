import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { sql } from 'drizzle-orm';
import { OPERATION_KINDS } from '../machines/OperationKind.ts';
import { defaultRoute } from '../machines/routing.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { RuntimeTiming } from '../runtime/RuntimeTiming.ts';
import { transportNames } from '../transport/TransportNames.ts';
import type { Cluster, OpstateProcess } from './cluster.ts';
import type { NatsServerProcess, PrivatePostgres } from './privateServers.ts';
import type { Rng } from './rng.ts';
import { persist } from './workload.ts';

export const FAULT_KINDS = [
  'kill-worker',
  'kill-leader',
  'freeze-worker',
  'freeze-leader',
  'restart-nats',
  'restart-postgres',
  'purge-heartbeats',
  'junk-dispatch',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** One fault as injected: when it began, when it was over, what it hit. */
export interface FaultRecord {
  readonly kind: FaultKind;
  readonly at: Date;
  readonly until: Date;
  readonly detail: string;
}

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Everything a fault can reach. */
export interface FaultTargets {
  readonly cluster: Cluster;
  readonly postgres: PrivatePostgres;
  readonly nats: NatsServerProcess;
  readonly database: Database;
  readonly prefix: string;
  readonly timing: RuntimeTiming;
  readonly rng: Rng;
}

/** The control-plane process that holds the leadership lease now, if any. */
async function leaderOf(t: FaultTargets): Promise<OpstateProcess | undefined> {
  const rows = await persist(
    'reading the leadership lease',
    () =>
      t.database.execute<{ holder: string }>(
        sql`select holder from control_plane_lease where expires_at > now()`,
      ),
    Date.now() + 60_000,
  );
  const pid = Number(rows[0]?.holder.split(':')[1]);
  return t.cluster.controlPlanes.find((p) => p.proc.pid === pid);
}

async function withNats<T>(
  t: FaultTargets,
  fn: (nc: Awaited<ReturnType<typeof connect>>) => Promise<T>,
) {
  const nc = await connect({ servers: t.nats.url, timeout: 5_000 });
  try {
    return await fn(nc);
  } finally {
    await nc.close();
  }
}

const JUNK = [
  Uint8Array.from([0xff, 0x00, 0x13, 0x37]),
  new TextEncoder().encode('{"operationId": "broken'),
  new TextEncoder().encode(JSON.stringify({ hello: 'chaos' })),
  new TextEncoder().encode(
    JSON.stringify({ operationId: '00000000-0000-4000-8000-000000000000', attempt: 1 }),
  ),
  // 8 KiB of an opening brace: over the transport's message bound, under the stream's.
  new Uint8Array(8 * 1024).fill(0x7b),
  // Half a megabyte: over the stream's max_msg_size, refused by the broker on publish.
  new Uint8Array(512 * 1024).fill(0x7b),
];

/** Injects one fault and returns once it is over (processes restarted, servers back). */
export async function inject(kind: FaultKind, t: FaultTargets): Promise<FaultRecord> {
  const at = new Date();
  const done = (detail: string): FaultRecord => ({ kind, at, until: new Date(), detail });
  const { cluster, timing } = t;
  switch (kind) {
    case 'kill-worker': {
      const w = t.rng.pick(cluster.workers.filter((p) => !p.frozen));
      if (w === undefined) return done('no worker running');
      await cluster.kill(w);
      const next = cluster.startWorker();
      return done(`SIGKILL ${w.name}; started ${next.name}`);
    }
    case 'kill-leader': {
      const leader = await leaderOf(t);
      if (leader === undefined) return done('no leader found');
      await cluster.kill(leader);
      const next = cluster.startControlPlane();
      return done(`SIGKILL leader ${leader.name}; started ${next.name}`);
    }
    case 'freeze-worker': {
      const w = t.rng.pick(cluster.workers.filter((p) => !p.frozen));
      if (w === undefined) return done('no worker running');
      cluster.freeze(w);
      await pause(timing.heartbeatTimeoutMs * 1.5 + t.rng.int(0, timing.heartbeatTimeoutMs));
      cluster.thaw(w);
      return done(`SIGSTOP ${w.name} past the heartbeat timeout, then SIGCONT`);
    }
    case 'freeze-leader': {
      const leader = await leaderOf(t);
      if (leader === undefined) return done('no leader found');
      cluster.freeze(leader);
      await pause(timing.leaderLeaseMs * 1.5 + t.rng.int(0, timing.leaderLeaseMs));
      cluster.thaw(leader);
      return done(`SIGSTOP leader ${leader.name} past its lease, then SIGCONT`);
    }
    case 'restart-nats':
      await t.nats.restart();
      return done('nats-server killed and started on its store');
    case 'restart-postgres':
      await t.postgres.restart('immediate');
      return done('pg_ctl restart -m immediate');
    case 'purge-heartbeats': {
      const purged = await withNats(t, async (nc) => {
        const kv = await new Kvm(jetstream(nc)).open(transportNames(t.prefix).heartbeatBucket);
        let n = 0;
        for await (const key of await kv.keys()) {
          await kv.purge(key);
          n++;
        }
        return n;
      });
      return done(`purged ${purged} heartbeat keys`);
    }
    case 'junk-dispatch': {
      const names = transportNames(t.prefix);
      const sent = await withNats(t, async (nc) => {
        let n = 0;
        for (const k of OPERATION_KINDS) {
          const data = t.rng.pick(JUNK) ?? JUNK[0];
          if (data === undefined) continue;
          await nc.request(names.subject(defaultRoute(k)), data, { timeout: 5_000 });
          n++;
        }
        return n;
      });
      return done(`${sent} junk messages on the dispatch subjects`);
    }
  }
}
