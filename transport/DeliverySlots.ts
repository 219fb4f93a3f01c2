import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/**
 * One bound on the deliveries a process holds at once, shared by several subscriptions (a
 * worker's queues): deliveries handed to a handler and not yet settled, plus messages asked of the
 * broker and not yet received, never exceed `size`. When there are fewer free slots than
 * subscriptions waiting for one, they take turns in arrival order, so a busy queue cannot starve a
 * quiet one.
 *
 * @example
 * ```ts
 * const slots = new DeliverySlots(8);
 * for (const route of routes) transport.consume(route, { concurrency: 8, slots }, handler);
 * ```
 */
export class DeliverySlots {
  #held = 0;
  #requested = 0;
  readonly #members = new Set<() => void>();
  readonly #turns: object[] = [];

  constructor(readonly size: number) {
    if (!Number.isSafeInteger(size) || size < 1) {
      throw new OpstateError(
        OpstateErrorCode.BAD_INPUT,
        `delivery slots must be a positive integer; got ${String(size)}.`,
        { details: { size } },
      );
    }
  }

  /** Deliveries held now (handed to a handler, not yet settled). */
  get held(): number {
    return this.#held;
  }

  /** Slots neither held nor asked for. */
  get free(): number {
    return this.size - this.#held - this.#requested;
  }

  /** Subscriptions sharing the slots. */
  get members(): number {
    return this.#members.size;
  }

  /** More subscriptions than slots: pulls should be short so slots go round. */
  get contended(): boolean {
    return this.#members.size > this.size;
  }

  /** Joins; `wake` is called whenever slots free up. Returns the leave function. */
  join(wake: () => void): () => void {
    this.#members.add(wake);
    return () => {
      this.#members.delete(wake);
      this.#dropTurn(wake);
      this.#notify();
    };
  }

  /**
   * How many a subscription (`who`) may ask for now, given what it has asked for and not received
   * (`outstanding`): at most its fair share (`size` / members) and what is free; 0 while another
   * subscription waits ahead of it for a turn.
   */
  grant(who: object, outstanding: number): number {
    const share = Math.max(1, Math.ceil(this.size / Math.max(1, this.#members.size)));
    const n = Math.min(this.free, share - outstanding);
    if (n <= 0) {
      if (outstanding === 0 && !this.#turns.includes(who)) this.#turns.push(who);
      return 0;
    }
    const first = this.#turns[0];
    if (first !== undefined && first !== who) {
      if (outstanding === 0 && !this.#turns.includes(who)) this.#turns.push(who);
      return 0;
    }
    this.#dropTurn(who);
    return n;
  }

  /** Records `n` messages asked of the broker. */
  request(n: number): void {
    this.#requested += n;
  }

  /** A delivery is handed to a handler: it holds a slot until it is settled. */
  hold(): void {
    this.#held++;
  }

  /** `n` messages asked for arrived, or will not come (the pull ended short). */
  cancel(n: number): void {
    this.#requested = Math.max(0, this.#requested - n);
    if (n > 0) this.#notify();
  }

  /** A held delivery was settled: its slot is free. */
  settled(): void {
    this.#held = Math.max(0, this.#held - 1);
    this.#notify();
  }

  #dropTurn(who: object): void {
    const i = this.#turns.indexOf(who);
    if (i >= 0) this.#turns.splice(i, 1);
  }

  #notify(): void {
    for (const wake of this.#members) wake();
  }
}
