import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { type NatsCredentials, userInfoOf } from './natsCredentials.ts';

/** What a NATS server says of itself in its INFO: whether clients must authenticate. */
export interface AuthInfo {
  readonly auth_required?: boolean;
}

/**
 * Whether the server this connection reached lets anyone in: its INFO does not ask for
 * authentication, or this process gave it no credentials at all (no user, token, NKey or creds,
 * no user info in a server URL) and was let in anyway (a `no_auth_user` maps anonymous clients to
 * a user). Of a connection opened elsewhere (`'unknown'` credentials) only the INFO tells. On
 * such a server any client that reaches the port can forge heartbeats, publish
 * dispatches and read every queue.
 *
 * @example
 * ```ts
 * acceptsAnonymous(nc.info, { auth: { type: 'none' } }, ['nats://127.0.0.1:4222']); // true
 * ```
 */
export function acceptsAnonymous(
  info: AuthInfo | undefined,
  credentials: NatsCredentials | undefined | 'unknown',
  servers: readonly string[],
): boolean {
  if (info?.auth_required !== true) return true;
  if (credentials === 'unknown') return false;
  const auth = credentials?.auth ?? { type: 'none' };
  const inUrl = servers.some((s) => userInfoOf(s) !== undefined);
  return auth.type === 'none' && !inUrl;
}

/**
 * The refusal of a runtime that reached a NATS server taking anonymous clients without being told
 * that is meant: it says why and both ways out.
 */
export function anonymousNatsRefusal(servers: string | undefined): OpstateError {
  return new OpstateError(
    OpstateErrorCode.CONFIG,
    `NATS at ${servers ?? 'the given connection'} accepts clients without credentials: anyone who reaches it can forge heartbeats, publish or delete dispatches and read every queue. Turn authorization on (deploy/nats.conf: a user per role) and give this process its credentials (OPSTATE_NATS_USER and OPSTATE_NATS_PASSWORD, OPSTATE_NATS_TOKEN, OPSTATE_NATS_NKEY_SEED_FILE or OPSTATE_NATS_CREDS_FILE); or, on a development server only, say that is meant: --insecure-nats (OPSTATE_NATS_INSECURE=1; insecureNats: true when embedding).`,
  );
}

/** The one WARNING a runtime logs when it runs on an anonymous NATS because it was told to. */
export const INSECURE_NATS_WARNING =
  'NATS accepts clients without credentials and this process was told to run on it anyway (--insecure-nats, OPSTATE_NATS_INSECURE=1 or insecureNats); anyone who reaches the server can forge heartbeats and dispatches. Use it for development only.';
