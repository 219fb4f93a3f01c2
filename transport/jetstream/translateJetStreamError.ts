import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { errors } from '@nats-io/transport-node';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { certificateFailure } from '../../machines/tlsFailure.ts';

/**
 * Maps a failure of the NATS client or the JetStream API to an `OpstateError` `TRANSPORT`, so
 * nothing above this layer sees a client-library error. Timeouts, missing responders and lost
 * connections are retryable; a missing stream or consumer is not (run `ensure()` first); a closed
 * connection is not (create a new transport).
 *
 * @example
 * ```ts
 * try { await js.publish(subject, data); }
 * catch (err) { throw translateJetStreamError(err, 'publish', { subject }); }
 * ```
 */
export function translateJetStreamError(
  err: unknown,
  action: string,
  details: Record<string, unknown> = {},
): OpstateError {
  if (err instanceof OpstateError) return err;
  const text = err instanceof Error ? err.message : String(err);
  if (err instanceof JetStreamApiError) {
    const missing =
      err.code === JetStreamApiCodes.StreamNotFound ||
      err.code === JetStreamApiCodes.ConsumerNotFound;
    return new OpstateError(
      OpstateErrorCode.TRANSPORT,
      missing
        ? `JetStream ${action} failed: ${text}. Call transport.ensure(routes) before using a route.`
        : `JetStream ${action} failed: ${text} (API error ${err.code}).`,
      { details: { ...details, apiCode: err.code }, retryable: !missing, cause: err },
    );
  }
  if (err instanceof errors.ClosedConnectionError) {
    return new OpstateError(
      OpstateErrorCode.TRANSPORT,
      `JetStream ${action} failed: the connection is closed; create a new transport.`,
      { details, retryable: false, cause: err },
    );
  }
  const certificate = certificateFailure(err);
  if (certificate !== undefined) {
    return new OpstateError(
      OpstateErrorCode.CONFIG,
      `NATS's TLS certificate does not verify (${certificate.code}: ${certificate.message}); set OPSTATE_NATS_CA_FILE (natsCredentials.tls.caFile when embedding) to the CA that signed it, and name the host the certificate is for`,
      { details, retryable: false, cause: err },
    );
  }
  const root = err instanceof errors.RequestError && err.cause instanceof Error ? err.cause : err;
  if (
    root instanceof errors.AuthorizationError ||
    root instanceof errors.UserAuthenticationExpiredError
  ) {
    return new OpstateError(
      OpstateErrorCode.TRANSPORT,
      `NATS refused the connection: ${root.message}. Give the credentials of a user this server knows: OPSTATE_NATS_USER and OPSTATE_NATS_PASSWORD, OPSTATE_NATS_TOKEN, OPSTATE_NATS_NKEY_SEED_FILE or OPSTATE_NATS_CREDS_FILE (natsCredentials when embedding).`,
      { details, retryable: false, cause: err },
    );
  }
  if (root instanceof errors.PermissionViolationError) {
    return new OpstateError(
      OpstateErrorCode.TRANSPORT,
      `JetStream ${action} failed: NATS does not permit this user to ${root.operation} to ${root.subject}; that belongs to another role (see the server's permissions for this user).`,
      { details: { ...details, subject: root.subject }, retryable: false, cause: err },
    );
  }
  const transient =
    err instanceof errors.TimeoutError ||
    err instanceof errors.NoRespondersError ||
    err instanceof errors.RequestError ||
    err instanceof errors.ConnectionError ||
    err instanceof errors.DrainingConnectionError;
  return new OpstateError(
    OpstateErrorCode.TRANSPORT,
    `JetStream ${action} failed: ${text}${transient ? '; retry when the broker is reachable' : ''}.`,
    { details, retryable: transient, cause: err },
  );
}
