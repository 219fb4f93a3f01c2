import { RequestOne } from '@nats-io/nats-core/internal';

/**
 * `@nats-io/nats-core` 3.4's `RequestOne.resolver` settles the request, then calls `cancel()`,
 * which builds a `RequestError("cancelled")` (with its stack trace) only to reject a promise that
 * is settled already: a measurable share of a busy process's time, as every publish and heartbeat
 * is a request. This wraps the resolver so that, while it runs, `cancel()` only stops the timer
 * and drops the subscription; behaviour is unchanged. Applied once, on the `RequestOne` every
 * NATS module of the process shares, and only to a resolver that settles before it cancels (read
 * from its source), so a client release that changes the order keeps its own. Drop it once
 * upstream stops building the error.
 *
 * @example
 * ```ts
 * settleRequestsCheaply(); // before the first request; later calls do nothing
 * ```
 */
export function settleRequestsCheaply(): boolean {
  const proto = RequestOne.prototype as RequestOne & { [APPLIED]?: true };
  if (proto[APPLIED] === true) return true;
  const upstream = proto.resolver;
  if (!settlesBeforeCancelling(upstream)) return false;
  proto.resolver = function resolver(this: RequestOne, err, msg) {
    const own = this as RequestOne & { cancel: RequestOne['cancel'] };
    own.cancel = settledCancel;
    try {
      upstream.call(this, err, msg);
    } finally {
      delete (own as Partial<RequestOne>).cancel;
    }
  };
  proto[APPLIED] = true;
  return true;
}

const APPLIED = Symbol.for('opstate.settleRequestsCheaply');

/** `cancel()` of a request whose promise is settled: no error to build, nothing to reject. */
function settledCancel(this: RequestOne): void {
  this.timer?.cancel();
  this.mux.cancel(this);
}

/** Whether the resolver settles the request's promise on both paths before it calls `cancel()`. */
function settlesBeforeCancelling(resolver: RequestOne['resolver']): boolean {
  const source = resolver.toString();
  const cancel = source.lastIndexOf('this.cancel()');
  return (
    cancel !== -1 &&
    source.indexOf('this.cancel(') === cancel &&
    source.lastIndexOf('this.deferred.resolve(') < cancel &&
    source.lastIndexOf('this.deferred.reject(') < cancel &&
    source.includes('this.deferred.resolve(') &&
    source.includes('this.deferred.reject(')
  );
}
