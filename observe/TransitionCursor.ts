/** How long an id the cursor stepped over (an insert not yet committed) is still waited for. */
export const LATE_COMMIT_GRACE_MS = 10_000;
/** At most this many such ids are remembered (a rolled-back bulk insert leaves many). */
export const MAX_GAPS = 10_000;

/**
 * Where a reading of `operation_transition` stands, in id order from where it
 * started. Identity ids are handed out at insert but become visible at commit, so a lower id can
 * appear after a higher one was read: each id stepped over is remembered for a grace period and
 * asked for again, so an outcome that commits late is still counted. Used by the circuit breaker
 * and the inspection stream. Pure bookkeeping: time comes in as `now`.
 *
 * @example
 * ```ts
 * const cursor = new TransitionCursor();
 * cursor.start(await repo.latestTransitionId());
 * const { ids } = await repo.readOutcomes(cursor.after, cursor.gaps(now), 1024);
 * cursor.advance(ids, now);
 * ```
 */
export class TransitionCursor {
  #after: number | undefined;
  readonly #gaps = new Map<number, number>();

  /** Whether the cursor has its starting point (the newest id when the loop started). */
  get started(): boolean {
    return this.#after !== undefined;
  }

  start(after: number): void {
    this.#after = after;
  }

  get after(): number {
    return this.#after ?? 0;
  }

  /** Ids to ask for again; forgets those older than the grace period. */
  gaps(now: number): number[] {
    for (const [id, since] of this.#gaps)
      if (now - since > LATE_COMMIT_GRACE_MS) this.#gaps.delete(id);
    return [...this.#gaps.keys()];
  }

  /** Records what a read returned (in id order): advances, and remembers the ids it stepped over. */
  advance(ids: readonly number[], now: number): void {
    let last = this.after;
    for (const id of ids) {
      if (this.#gaps.delete(id) || id <= last) continue;
      for (let missing = Math.max(last + 1, id - MAX_GAPS); missing < id; missing++) {
        this.#gaps.set(missing, now);
      }
      last = id;
    }
    this.#after = last;
    for (const id of this.#gaps.keys()) {
      if (this.#gaps.size <= MAX_GAPS) break;
      this.#gaps.delete(id);
    }
  }
}
