/**
 * A flush that callers share: acks sent while a flush is in flight share the next one, so many
 * acks cost one round trip. At most one flush runs and at most one waits behind it.
 *
 * @example
 * ```ts
 * const flush = coalescedFlush(() => nc.flush());
 * await Promise.all([flush(), flush(), flush()]); // two flushes at most
 * ```
 */
export function coalescedFlush(flushOnce: () => Promise<void>): () => Promise<void> {
  let flushing: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  const flush = (): Promise<void> => {
    if (!flushing) {
      flushing = flushOnce().finally(() => {
        flushing = undefined;
      });
      return flushing;
    }
    queued ??= flushing
      .catch(() => {})
      .then(() => {
        queued = undefined;
        return flush();
      });
    return queued;
  };
  return flush;
}
