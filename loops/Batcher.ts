/**
 * Group commit for the hot path: calls made while the flushes in flight (`inFlight`, default 1)
 * are running are queued and go out together in the next flush. At a trickle every call flushes alone (no added latency); under
 * load the batch grows by itself, so N concurrent deliveries cost one statement instead of N.
 *
 * @example
 * ```ts
 * const starts = createBatcher((items: StartItem[]) => store.applyManyTo(items), { max: 256 });
 * const result = await starts.submit(item); // resolves with this item's result
 * ```
 */
export interface Batcher<I, R> {
  submit(item: I): Promise<R>;
}

interface Pending<I, R> {
  readonly item: I;
  readonly resolve: (r: R) => void;
  readonly reject: (e: unknown) => void;
}

export function createBatcher<I, R>(
  flush: (items: I[]) => Promise<R[]>,
  options: { max: number; inFlight?: number },
): Batcher<I, R> {
  const queue: Pending<I, R>[] = [];
  const lanes = Math.max(1, options.inFlight ?? 1);
  let running = 0;

  // Each lane flushes what is queued when it starts, then what queued up meanwhile.
  const drain = async () => {
    running++;
    while (queue.length > 0) {
      const batch = queue.splice(0, options.max);
      try {
        const results = await flush(batch.map((p) => p.item));
        batch.forEach((p, i) => {
          p.resolve(results[i] as R);
        });
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
    running--;
  };

  return {
    submit(item) {
      return new Promise<R>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        if (running < lanes) void drain();
      });
    },
  };
}
