/** A version-7 uuid of the RFC 9562 variant, in the lower case both Node and Postgres print. */
export const TIME_ORDERED_ID =
  /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The Unix milliseconds a version-7 uuid carries in its first 48 bits. */
export const millisOf = (id: string): number =>
  Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);
