import type { PublishItem, PublishManyResult, PublishResult } from '../Transport.ts';

/**
 * Publishes `items` with up to `window` publishes in flight, each item's outcome at its index:
 * one refused publish does not stop the others.
 *
 * @example
 * ```ts
 * const results = await publishInLanes(items, 1000, (route, message) => publish(route, message));
 * const failed = results.filter((r) => !r.ok);
 * ```
 */
export async function publishInLanes(
  items: readonly PublishItem[],
  window: number,
  publishOne: (
    route: PublishItem['route'],
    message: PublishItem['message'],
  ) => Promise<PublishResult>,
): Promise<PublishManyResult[]> {
  const results: PublishManyResult[] = new Array(items.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      const item = items[i] as PublishItem;
      try {
        const r = await publishOne(item.route, item.message);
        results[i] = { ok: true, duplicate: r.duplicate };
      } catch (err) {
        results[i] = { ok: false, error: err instanceof Error ? err : new Error(String(err)) };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(window, items.length) }, lane));
  return results;
}
