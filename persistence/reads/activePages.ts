import type { ActiveOperation, ActivePage, ActivePosition } from '../ActiveOperation.ts';

/** Rows a page of `activePages` reads: enough that a pass over 10,000 in flight takes ten. */
export const ACTIVE_PAGE_SIZE = 1000;

/**
 * Every page of `listActiveOlderThan(before)`, oldest first, until one comes back short. A pass
 * that read only the first page would never see past the oldest `pageSize` operations: with that
 * many healthy long-running ones in flight, a lost one behind them would never be reset.
 *
 * @example
 * ```ts
 * for await (const old of activePages(store, new Date(now - floorMs))) resetLost(old);
 * ```
 */
export async function* activePages(
  store: {
    listActiveOlderThan(
      before: Date,
      limit?: number,
      page?: ActivePage,
    ): Promise<ActiveOperation[]>;
  },
  before: Date,
  only: Pick<ActivePage, 'status'> = {},
  pageSize = ACTIVE_PAGE_SIZE,
): AsyncGenerator<ActiveOperation[]> {
  let after: ActivePosition | undefined;
  for (;;) {
    const rows = await store.listActiveOlderThan(before, pageSize, {
      ...only,
      ...(after === undefined ? {} : { after }),
    });
    if (rows.length > 0) yield rows;
    const last = rows.at(-1);
    if (rows.length < pageSize || last === undefined) return;
    after = last.position;
  }
}
