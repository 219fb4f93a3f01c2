import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { queueName, queueSubject, type Route } from '../machines/routing.ts';

/** Every broker name of one deployment, all derived from its prefix. */
export interface TransportNames {
  readonly prefix: string;
  /** The work-queue stream holding every dispatch. */
  readonly stream: string;
  /**
   * The subject space of the deployment's dispatches, `<prefix>.dispatch.>` (for permissions);
   * the stream itself captures only the routes' subjects within it.
   */
  readonly streamSubjects: string;
  /** The heartbeat KV bucket. */
  readonly heartbeatBucket: string;
  /** The durable consumer of a route: the frozen queue name. */
  consumer(route: Route): string;
  /** The subject a route's dispatches are published on. */
  subject(route: Route): string;
}

const PREFIX = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Derives the stream, subjects, consumer and bucket names from a deployment prefix, so a test run
 * (or a second deployment on one server) only needs a unique prefix. Throws `CONFIG` when the
 * prefix is not a valid subject token and stream name.
 *
 * @example
 * ```ts
 * const n = transportNames('opstate');
 * n.stream; // 'opstate_dispatch'
 * n.subject(route); // 'opstate.dispatch.long_term_archive.long_term_archive_transfer'
 * ```
 */
export function transportNames(prefix: string): TransportNames {
  if (!PREFIX.test(prefix)) {
    throw new OpstateError(
      OpstateErrorCode.CONFIG,
      `Transport prefix ${JSON.stringify(prefix)} is invalid: use 1–64 letters, digits, "-" or "_".`,
      { details: { prefix } },
    );
  }
  return Object.freeze({
    prefix,
    stream: `${prefix}_dispatch`,
    streamSubjects: `${prefix}.dispatch.>`,
    heartbeatBucket: `${prefix}_heartbeats`,
    consumer: (route: Route) => queueName(route),
    subject: (route: Route) => queueSubject(prefix, route),
  });
}
