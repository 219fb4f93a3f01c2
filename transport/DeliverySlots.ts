import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';

/**
 * One bound on the deliveries a process holds at once, shared by several subscriptions (a
 * worker's queues): deliveries handed to a handler and not yet settled, plus messages asked of the
 * broker and not yet received, never exceed `size`. When there are fewer free slots than
 * subscriptions waiting for one, they take turns in arrival order, so a busy queue cannot starve a
 * quiet one. A subscription whose last pull came back empty (`idle`) asks for one message at a
 * time, and the others share what the idle ones leave: a worker serving six queues of which one
 * is busy gives that one all but five slots, not a sixth of them.
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
  readonly #idle = new Set<object>();

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

  /**
   * Joins; `wake` is called whenever slots free up. `who` is what the subscription passes to
   * `grant` and `setIdle` (default: `wake`), so leaving also gives up its turn and its idle mark.
   * Returns the leave function.
   */
  join(wake: () => void, who: object = wake): () => void {
    this.#members.add(wake);
    return () => {
      this.#members.delete(wake);
      this.#dropTurn(who);
      this.#idle.delete(who);
      this.#notify();
    };
  }

  /**
   * How many a subscription (`who`) may ask for now, given what it has asked for and not received
   * (`outstanding`): at most its fair share (`size` / members) and what is free; 0 while another
   * subscription waits ahead of it for a turn.
   */
  grant(who: object, outstanding: number): number {
    const share = this.#shareOf(who);
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

  /**
   * Whether `who`'s last pull came back empty: an idle subscription is granted one slot at a time
   * (a probe that still hears its queue), and the busy ones share the rest. Marked busy again as
   * soon as a pull brings a message.
   */
  setIdle(who: object, idle: boolean): void {
    if (idle === this.#idle.has(who)) return;
    if (idle) {
      this.#idle.add(who);
      // An idle subscription among more than the slots asks its queue before it waits for a turn.
      this.#dropTurn(who);
    } else this.#idle.delete(who);
    this.#notify();
  }

  /** Whether `who`'s last pull came back empty (see `setIdle`). */
  isIdle(who: object): boolean {
    return this.#idle.has(who);
  }

  /** A subscription's fair share: 1 while idle, else an equal part of what idle ones leave. */
  #shareOf(who: object): number {
    if (this.#idle.has(who)) return 1;
    const idle = this.#idle.size;
    const busy = Math.max(1, this.#members.size - idle);
    return Math.max(1, Math.ceil((this.size - Math.min(idle, this.size)) / busy));
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
