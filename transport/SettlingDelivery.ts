import type { Route } from '../machines/routing.ts';
import type { Delivery, DispatchMessage } from './Transport.ts';

/**
 * The settle-once rules every `Delivery` shares: the first of `ack`, `nak` or `term` wins, later
 * calls are ignored, a second `ack` returns the first one's promise, and `working()` after
 * settlement does nothing. A failed ack confirmation un-settles the delivery so the caller may
 * retry it. Implementations supply the broker calls.
 *
 * @example
 * ```ts
 * class MyDelivery extends SettlingDelivery {
 *   protected doAck() { return broker.ack(id); }
 *   protected doNak(ms: number) { broker.nak(id, ms); }
 *   protected doWorking() { broker.touch(id); }
 *   protected doTerm() { broker.term(id); }
 * }
 * ```
 */
export abstract class SettlingDelivery implements Delivery {
  #settled = false;
  #ack: Promise<void> | undefined;
  /** Called once, on the first ack, nak or term (before an ack is confirmed). */
  onSettled: (() => void) | undefined;

  constructor(
    readonly message: DispatchMessage,
    readonly route: Route,
    readonly deliveryCount: number,
  ) {}

  /** Whether `ack`, `nak` or `term` has been called (and the ack did not fail). */
  get settled(): boolean {
    return this.#settled;
  }

  ack(): Promise<void> {
    if (this.#ack) return this.#ack;
    if (this.#settled) return Promise.resolve();
    this.#settle();
    const pending = this.doAck().catch((err: unknown) => {
      this.#settled = false;
      this.#ack = undefined;
      throw err;
    });
    this.#ack = pending;
    return pending;
  }

  nak(delayMs = 0): void {
    if (this.#settled) return;
    this.#settle();
    this.doNak(Number.isFinite(delayMs) && delayMs > 0 ? Math.floor(delayMs) : 0);
  }

  working(): void {
    if (this.#settled) return;
    this.doWorking();
  }

  term(): void {
    if (this.#settled) return;
    this.#settle();
    this.doTerm();
  }

  #settle(): void {
    this.#settled = true;
    const callback = this.onSettled;
    this.onSettled = undefined;
    callback?.();
  }

  protected abstract doAck(): Promise<void>;
  protected abstract doNak(delayMs: number): void;
  protected abstract doWorking(): void;
  protected abstract doTerm(): void;
}
