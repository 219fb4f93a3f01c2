import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createUser } from '@nats-io/nkeys';
import type { NatsCredentials } from '../../transport/jetstream/natsCredentials.ts';
import { freePort, NatsServerProcess } from '../transport/helpers.ts';

/**
 * The deployment's own NATS configuration (deploy/nats.conf: one account, a user per role with
 * least privilege, NKeys, an inbox per role), run as it is on a private nats-server.
 */
export const DEPLOY_NATS_CONF = fileURLToPath(new URL('../../deploy/nats.conf', import.meta.url));

/** One user of deploy/nats.conf: its NKey seed in a file, as a process is given it. */
export interface DeployNatsUser {
  readonly publicKey: string;
  readonly seed: string;
  readonly seedFile: string;
  readonly credentials: NatsCredentials;
  /** The environment an `opstate` process of this user runs with. */
  readonly env: Record<string, string>;
}

/** A private nats-server on deploy/nats.conf with fresh NKeys for its users. */
export interface DeployNats {
  readonly server: NatsServerProcess;
  readonly url: string;
  readonly controlPlane: DeployNatsUser;
  readonly workerA: DeployNatsUser;
  readonly workerB: DeployNatsUser;
  /** The dashboard's and `opstate status`'s user: reads heartbeats, changes nothing. */
  readonly observer: DeployNatsUser;
  /** Every seed, to assert none reaches any output. */
  readonly secrets: readonly string[];
  close(): Promise<void>;
}

/**
 * Starts a private nats-server on deploy/nats.conf, unchanged, with a fresh NKey per user: the
 * public keys go to the server's environment (as docker-compose.yml passes them), the seeds to
 * files the processes read (`OPSTATE_NATS_NKEY_SEED_FILE`). `extraArgs` add flags (TLS).
 *
 * @example
 * ```ts
 * const nats = await startDeployNats();
 * await createRuntime({ natsUrl: nats.url, natsCredentials: nats.controlPlane.credentials, … });
 * ```
 */
export async function startDeployNats(extraArgs: readonly string[] = []): Promise<DeployNats> {
  const dir = await mkdtemp(join(tmpdir(), 'opstate-deploy-nats-'));
  const user = async (name: string): Promise<DeployNatsUser> => {
    const pair = createUser();
    const seed = new TextDecoder().decode(pair.getSeed());
    const seedFile = join(dir, `${name}.nk`);
    await writeFile(seedFile, `${seed}\n`, { mode: 0o600 });
    return {
      publicKey: pair.getPublicKey(),
      seed,
      seedFile,
      credentials: { auth: { type: 'nkey', seedFile } },
      env: { OPSTATE_NATS_NKEY_SEED_FILE: seedFile },
    };
  };
  const controlPlane = await user('control-plane');
  const workerA = await user('worker-a');
  const workerB = await user('worker-b');
  const observer = await user('observer');
  const server = await NatsServerProcess.create();
  try {
    await server.start({
      args: ['-c', DEPLOY_NATS_CONF, '-m', String(await freePort()), ...extraArgs],
      env: {
        OPSTATE_NATS_CONTROL_PLANE_NKEY: controlPlane.publicKey,
        OPSTATE_NATS_WORKER_A_NKEY: workerA.publicKey,
        OPSTATE_NATS_WORKER_B_NKEY: workerB.publicKey,
        OPSTATE_NATS_OBSERVER_NKEY: observer.publicKey,
      },
    });
  } catch (err) {
    await server.dispose();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    server,
    url: server.url,
    controlPlane,
    workerA,
    workerB,
    observer,
    secrets: [controlPlane.seed, workerA.seed, workerB.seed, observer.seed],
    async close() {
      await server.dispose();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
