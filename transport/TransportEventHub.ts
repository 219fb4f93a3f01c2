import type { TransportEvent, TransportStats } from './Transport.ts';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * Fans transport events out to listeners and keeps the running totals. A listener that throws is
 * ignored: reporting never breaks consuming.
 *
 * @example
 * ```ts
 * const hub = new TransportEventHub();
 * const off = hub.on((e) => console.log(e.type));
 * hub.emit({ type: 'disconnected' });
 * off();
 * ```
 */
export class TransportEventHub {
  readonly #listeners = new Set<(event: TransportEvent) => void>();
  readonly #stats: Mutable<TransportStats> = {
    published: 0,
    duplicates: 0,
    rejected: 0,
    maxDeliveries: 0,
    handlerErrors: 0,
  };

  on(listener: (event: TransportEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  emit(event: TransportEvent): void {
    if (event.type === 'rejected') this.#stats.rejected++;
    else if (event.type === 'max_deliveries') this.#stats.maxDeliveries++;
    else if (event.type === 'handler_error') this.#stats.handlerErrors++;
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // A faulty listener must not stop the transport.
      }
    }
  }

  countPublish(duplicate: boolean): void {
    if (duplicate) this.#stats.duplicates++;
    else this.#stats.published++;
  }

  stats(): TransportStats {
    return { ...this.#stats };
  }
}
