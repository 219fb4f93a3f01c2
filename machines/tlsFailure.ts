/** Node's codes for a server certificate that does not verify (untrusted, expired, wrong name). */
const CERTIFICATE_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'INVALID_CA',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * The code and message of a server certificate that failed verification, found on the error or
 * its causes; undefined for any other failure. Such a failure is configuration (which CA to
 * trust, which host to name), never an outage to wait out.
 *
 * @example
 * ```ts
 * const bad = certificateFailure(err); // { code: 'SELF_SIGNED_CERT_IN_CHAIN', message: '…' }
 * ```
 */
export function certificateFailure(err: unknown): { code: string; message: string } | undefined {
  for (let e = err, depth = 0; e !== null && typeof e === 'object' && depth < 5; depth++) {
    const { code, message, cause } = e as { code?: unknown; message?: unknown; cause?: unknown };
    if (typeof code === 'string' && CERTIFICATE_CODES.has(code)) {
      return { code, message: typeof message === 'string' ? message : code };
    }
    e = cause;
  }
  return undefined;
}
