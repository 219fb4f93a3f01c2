import { checkServerIdentity, type PeerCertificate } from 'node:tls';

/**
 * A `checkServerIdentity` that checks a server's certificate against the hosts the configuration
 * names, for clients that upgrade a socket to TLS without telling TLS the host when it is an IP
 * address (postgres.js, the NATS client): Node then checks the certificate against `localhost`,
 * so a certificate for `127.0.0.1` is refused and one for `localhost` accepted at any address.
 * When TLS was told a name other than that default, that name is checked, as Node does; when it
 * fell back to `localhost` (and the configuration does not name `localhost`), the certificate must
 * be for one of the configured hosts. Without configured hosts, Node's own check applies.
 *
 * @example
 * ```ts
 * tls.connect({ socket, ca, checkServerIdentity: identityOf(['127.0.0.1']) });
 * ```
 */
export function identityOf(
  hosts: readonly string[],
): (told: string, cert: PeerCertificate) => Error | undefined {
  return (told, cert) => {
    const fellBack = told === 'localhost' && !hosts.includes('localhost') && hosts.length > 0;
    const errors = (fellBack ? hosts : [told]).map((h) => checkServerIdentity(h, cert));
    return errors.includes(undefined) ? undefined : errors[0];
  };
}
