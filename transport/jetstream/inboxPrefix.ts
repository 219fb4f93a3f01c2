/** The roles of opstate's processes on NATS, each with reply subjects of its own. */
export type NatsRole = 'control-plane' | 'worker' | 'observer';

/**
 * The prefix of a process's reply subjects (the NATS client's `inboxPrefix`), one per role and,
 * for a worker given an id, per worker: `_INBOX_<prefix>_control-plane`,
 * `_INBOX_<prefix>_worker_<id>` (`_INBOX_<prefix>_worker` without one), `_INBOX_<prefix>_observer`
 * (the dashboard and `opstate status`, which only read). Every JetStream reply to the process — API answers,
 * pulled dispatches, heartbeat reads — comes on `<inbox prefix>.<random>`, so the server's
 * permissions can let each user subscribe to `<its inbox prefix>.>` only (deploy/nats.conf) and no
 * role reads another's replies. Deployment prefixes and worker ids are key-safe (letters,
 * digits, `-`, `_`, `=`), so the prefix is one subject token.
 *
 * @example
 * ```ts
 * inboxPrefixOf('opstate', 'worker', 'worker-a'); // '_INBOX_opstate_worker_worker-a'
 * ```
 */
export function inboxPrefixOf(prefix: string, role: NatsRole, workerId?: string): string {
  const base = `_INBOX_${prefix}_${role}`;
  return role === 'worker' && workerId !== undefined ? `${base}_${workerId}` : base;
}
